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
    syslog,
    websocket,
)

SCENARIOS = {
    **http.SCENARIOS,
    **framing.SCENARIOS,
    **control.SCENARIOS,
    **push.SCENARIOS,
    **gone.SCENARIOS,
    **sse.SCENARIOS,
    **websocket.SCENARIOS,
    **syslog.SCENARIOS,
}
