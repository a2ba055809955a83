"""`{name}` placeholders in manifest commands: which are allowed, and their expansion.

The syntax is Python's str.format without conversions or format specs, so a literal brace
in a shell command is written `{{` or `}}` (e.g. `${{HOME}}` for the shell's `${HOME}`).
"""

import string

BUILTIN_PLACEHOLDERS = ("port", "syslog_port", "docroot", "workdir", "name")


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


def expand(template: str, values: dict[str, str]) -> str:
    check_placeholders(template, set(values))
    return template.format_map(values)
