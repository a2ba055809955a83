"""`{name}` placeholders in manifest commands: which are allowed, and their expansion.

The syntax is Python's str.format without conversions or format specs, so a literal brace
in a shell command is written `{{` or `}}` (e.g. `${{HOME}}` for the shell's `${HOME}`).

A manifest command is shell text, but a value never is: every value is quoted for the
shell as it is put in, so a tunable, a path with spaces or `$(...)` reaches the server's
argv verbatim and is never run. That is also why a placeholder may not stand inside the
manifest's own quotes, where the quoting would become part of the value.
"""

import shlex
import string

# signals_file: where a server may write its runtime signals (GC, event-loop delay) as JSON
# lines; serverlab reads it after the test (serverlab.run.execution.signals). A server may
# ignore it.
BUILTIN_PLACEHOLDERS = (
    "port",
    "syslog_port",
    "host",
    "docroot",
    "workdir",
    "name",
    "signals_file",
)

# Placeholders a server gets only when it claims the part (spec §12-§15): the TLS port and
# the run's throwaway certificate and key (serverlab.base.tlskeys), the h2c port, and the
# RFC 5425 syslog port, which serves the same certificate.
PART_PLACEHOLDERS = {
    "tls": ("tls_port", "tls_cert", "tls_key"),
    "h2c": ("h2c_port",),
    "syslog-tls": ("syslog_tls_port", "tls_cert", "tls_key"),
}
# Spec §16: a gRPC server that owns whole connections (grpc_listener = "own") listens on
# ports of its own: cleartext always, TLS when the server claims `tls`. A server whose
# HTTP/2 stack hosts its gRPC server serves it on {h2c_port} and {tls_port} instead.
GRPC_OWN_PORTS = ("grpc_port", "grpc_tls_port")
# The parts that are served the run's key material.
KEY_PARTS = frozenset(part for part, names in PART_PLACEHOLDERS.items() if "tls_key" in names)


class PlaceholderError(ValueError):
    pass


def placeholders_in(template: str) -> list[str]:
    """The placeholder names a template uses, in order; PlaceholderError on bad syntax."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        hint = "write {{ or }} for a literal brace"
        raise PlaceholderError(f"bad braces ({error}); {hint}") from None
    names = []
    for _literal, field, format_spec, conversion in parsed:
        if field is None:
            continue
        if format_spec or conversion or not field.isidentifier():
            raise PlaceholderError(f"bad placeholder {{{field}}}: only {{word}} is allowed")
        names.append(field)
    return names


def check_placeholders(template: str, allowed: set[str]) -> None:
    for name in placeholders_in(template):
        if name not in allowed:
            known = ", ".join(f"{{{n}}}" for n in sorted(allowed))
            raise PlaceholderError(f"unknown placeholder {{{name}}} (known: {known})")
    quoted = _quoted_placeholder(template)
    if quoted:
        raise PlaceholderError(
            f"placeholder {{{quoted}}} stands inside quotes; write it bare: serverlab quotes "
            "every value for the shell itself"
        )


def render_command(template: str, values: dict[str, str]) -> str:
    """The shell command with every placeholder replaced by its value, quoted."""
    check_placeholders(template, set(values))
    return template.format_map({name: shlex.quote(str(value)) for name, value in values.items()})


def _quoted_placeholder(template: str) -> str | None:
    """The first placeholder inside single or double quotes of the shell text, if any."""
    quote = ""
    for literal, field, _spec, _conversion in string.Formatter().parse(template):
        escaped = False
        for char in literal:
            if escaped:
                escaped = False
            elif char == "\\" and quote != "'":
                escaped = True
            elif char in "'\"" and quote in ("", char):
                quote = "" if quote else char
        if field is not None and quote:
            return field
    return None
