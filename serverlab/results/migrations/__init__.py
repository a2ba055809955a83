"""Schema migrations of the results database, applied in order: file NNNN_*.sql is version NNNN.

Never edit a released step; add the next one. Every step runs inside the transaction that
also bumps PRAGMA user_version, so a failed upgrade leaves the database as it was.
"""

from importlib import resources


def migration_steps() -> list[str]:
    """The SQL of every step, step i (0-based) taking the schema from version i to i + 1."""
    files = sorted(
        (
            entry
            for entry in resources.files(__name__).iterdir()
            if entry.name.endswith(".sql") and entry.name[:4].isdigit()
        ),
        key=lambda entry: entry.name,
    )
    steps = [entry.read_text(encoding="utf-8") for entry in files]
    for expected, entry in enumerate(files, start=1):
        if int(entry.name[:4]) != expected:
            raise RuntimeError(f"migration {entry.name} is out of sequence (expected {expected})")
    return steps
