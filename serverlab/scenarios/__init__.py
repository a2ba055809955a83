"""Scenario kinds: the cases that need a program (concurrency, streams, timing, syslog).

A case in spec/cases names a kind and its parameters; each kind is one function
`(ctx, params, outcome) -> None` registered here.
"""

from serverlab.scenarios import control, framing, http, push, syslog

SCENARIOS = {
    **http.SCENARIOS,
    **framing.SCENARIOS,
    **control.SCENARIOS,
    **push.SCENARIOS,
    **syslog.SCENARIOS,
}
