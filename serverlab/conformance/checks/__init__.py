"""Check kinds: the cases that need a program (framing, concurrency, streams, timing,
syslog). A case in spec/cases names a kind and its parameters; each kind is one function
`(ctx, params, outcome) -> None` registered here.
"""

from serverlab.conformance.checks import (
    control,
    framing,
    gone,
    http,
    push,
    sse,
    stamps,
    syslog,
    syslogparse,
    websocket,
)

CHECKS = {
    **http.CHECKS,
    **framing.CHECKS,
    **control.CHECKS,
    **push.CHECKS,
    **stamps.CHECKS,
    **gone.CHECKS,
    **sse.CHECKS,
    **websocket.CHECKS,
    **syslog.CHECKS,
    **syslogparse.CHECKS,
}
