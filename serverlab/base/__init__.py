"""Base: what every stage stands on and nothing of serverlab's own above it. Where the
repository's folders are, which processes a run owns, how a command is told to stop, the
console people read, a raw HTTP client, free ports and bounded waits."""
