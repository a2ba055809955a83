"""Many machines: one test's load spread over generators on other hosts, coordinated by
Ray. The server, its monitor and the control calls run in an actor on the node with the
`serverlab_server` resource (the spec answers control calls from loopback only); each
generator is an actor on a `serverlab_loadgen` node, one per node (a STRICT_SPREAD
placement group). The plan is split like k6's execution segments, every generator starts
at one instant measured against the server's clock, and the results merge exactly."""
