"""The live page of a run (`serverlab run --live`, `serverlab watch`): the runner's progress
hooks become numbered events (feed), kept in a bounded log and in a side file in the run's
own work folder (events), served as server-sent events beside one self-contained page on
loopback, behind a random token (server); `watch` tails another run's side file (watch)."""
