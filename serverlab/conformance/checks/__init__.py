"""Check kinds: the cases that need a program (framing, concurrency, streams, timing,
syslog, TLS, HTTP/2, syslog over TLS, gRPC). A case in spec/cases names a kind and its
parameters; each kind is one function `(ctx, params, outcome) -> None` registered here.
"""

from serverlab.conformance.checks import (
    carried,
    control,
    framing,
    gone,
    grpc,
    h2,
    http,
    push,
    renegotiation,
    sse,
    stamps,
    syslog,
    syslogparse,
    syslogtls,
    tls,
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
    **syslogtls.CHECKS,
    **tls.CHECKS,
    **renegotiation.CHECKS,
    **h2.CHECKS,
    **carried.CHECKS,
    **grpc.CHECKS,
}
