"""The virtual lab: several hosts on one machine, so that a distributed run is tested for
real. Each host is a network namespace of its own, joined to the others by a bridge in a
switch namespace, addressed from 198.18.0.0/15 (RFC 2544's benchmarking range), with no
route out; each runs its own Ray node (`serverlab lab up` / `lab down`)."""
