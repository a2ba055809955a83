"""Checks of JSON documents against the shapes in spec/SPEC.md (dotted paths, field types)."""

from serverlab.conformance.outcome import Outcome

_TYPES = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "list": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}
_MISSING = object()


def lookup(document, dotted_path: str):
    """The value at `a.b.c`, or _MISSING."""
    value = document
    for key in dotted_path.split("."):
        if not isinstance(value, dict) or key not in value:
            return _MISSING
        value = value[key]
    return value


def has_type(value, type_spec: str) -> bool:
    """`type_spec` is a type name or alternatives joined by `|` (e.g. `int|null`)."""
    return any(_TYPES[name](value) for name in type_spec.split("|"))


def check_types(document, types: dict[str, str], outcome: Outcome, where: str = "") -> bool:
    """Every dotted path present with its type; records each problem; True if all fine."""
    prefix = f"{where}: " if where else ""
    fine = True
    for path, type_spec in types.items():
        value = lookup(document, path)
        if value is _MISSING:
            outcome.fail(f"{prefix}field '{path}' is missing")
            fine = False
        elif not has_type(value, type_spec):
            outcome.fail(f"{prefix}field '{path}' should be {type_spec}, got {value!r}"[:200])
            fine = False
    return fine


def check_subset(document, expected: dict, outcome: Outcome, where: str = "") -> None:
    """Every dotted path of `expected` has exactly that value in `document`."""
    prefix = f"{where}: " if where else ""
    for path, wanted in expected.items():
        value = lookup(document, path)
        if value is _MISSING:
            outcome.fail(f"{prefix}field '{path}' is missing")
        elif value != wanted or isinstance(value, bool) != isinstance(wanted, bool):
            outcome.fail(f"{prefix}field '{path}' is {value!r}, expected {wanted!r}"[:200])


def check_timing_triple(document, path: str, outcome: Outcome, where: str = "") -> None:
    """`<path>.duration` must equal `<path>.sent - <path>.created` (integer milliseconds)."""
    names = ("duration", "sent", "created")
    values = [lookup(document, f"{path}.{name}") for name in names]
    if all(has_type(v, "int") for v in values if v is not _MISSING) and _MISSING not in values:
        duration, sent, created = values
        if duration != sent - created:
            outcome.fail(
                f"{where}: {path}.duration {duration} != sent - created ({sent} - {created})"
            )
