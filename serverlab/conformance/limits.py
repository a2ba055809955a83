"""Known holes a contestant's manifest records (contestants/README.md): `framing_limits`
for framing cases (spec §1.1), `protocol_limits` for TLS and HTTP/2 cases (spec §12-§14)
and those of syslog over TLS (spec §15). A listed case's failure or warning shows as one
WARN naming the limit and its reason."""

from serverlab.conformance.cases import Case
from serverlab.contestant.manifest import Manifest

PROTOCOL_PARTS = ("tls", "h2", "h2c", "syslog-tls")

# Each table, the cases it may name, and how verify says what a listed case is.
TABLES = {
    "framing_limits": (lambda case: case.check == "framing", "a framing case", "framing limit"),
    "protocol_limits": (
        lambda case: case.part in PROTOCOL_PARTS and case.check != "carried",
        "a TLS, HTTP/2 or syslog-over-TLS case of its own (not one carrying another part)",
        "protocol limit",
    ),
}


def limits_problem(manifest: Manifest, cases: list[Case]) -> str:
    """Why one of the manifest's limit tables cannot stand, or "": each names a case of
    its kind."""
    for table, (allowed, kind, _label) in TABLES.items():
        allowed_ids = {case.id for case in cases if allowed(case)}
        for case_id in getattr(manifest, table):
            if case_id not in allowed_ids:
                return f"{manifest.path}: {table} names {case_id!r}, not {kind}"
    return ""


def limit_of(manifest: Manifest, case_id: str) -> tuple[str, str, str] | None:
    """(table, label, reason) if the manifest lists the case, else None."""
    for table, (_allowed, _kind, label) in TABLES.items():
        reason = getattr(manifest, table).get(case_id)
        if reason:
            return table, label, reason
    return None
