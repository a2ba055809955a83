"""The conformance cases of spec/cases/*.toml: loading, validation and selection.

Each file is one spec part; each `[[case]]` is either an exchange (`steps`, or one
`request` + `expect`) that is pure data, or a `check` kind with `params` that a Python
function in serverlab.conformance.checks carries out.
"""

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from serverlab.base.paths import spec_cases_dir
from serverlab.contestant.manifest import SPEC_PARTS

_CASE_KEYS = {
    "id",
    "about",
    "level",
    "bad_input",
    "records",
    "request",
    "expect",
    "steps",
    "check",
    "params",
}
REQUEST_KEYS = {
    "method",
    "target",
    "headers",
    "body",
    "json",
    "body_size",
    "chunks",
    "raw",
    "header_filler",
    "close",
}
EXPECT_KEYS = {
    "status",
    "warn_status",
    "close_warns",
    "media_type",
    "content_length",
    "body",
    "body_file",
    "json",
    "json_subset",
    "json_types",
    "headers",
    "secret_absent",
    "upload_digest",
    "error",
    "chunked",
}


class CaseFileError(Exception):
    pass


@dataclass(frozen=True)
class Step:
    request: dict
    expect: dict


@dataclass(frozen=True)
class Case:
    id: str
    part: str
    about: str
    level: str = "must"  # "should": a failure is only a warning
    bad_input: bool = False  # verify checks that the server still answers afterwards
    records: bool = False  # what the server did is shown, as for bad input (a TLS posture)
    steps: tuple[Step, ...] = ()
    check: str = ""
    params: dict = field(default_factory=dict)


def load_cases(directory: Path | None = None) -> list[Case]:
    """Every case of every part file, in file order; CaseFileError names file and case."""
    directory = directory or spec_cases_dir()
    cases: list[Case] = []
    for part in SPEC_PARTS:
        path = directory / f"{part}.toml"
        if path.exists():
            cases.extend(_load_file(path, part))
    ids = [case.id for case in cases]
    duplicates = {case_id for case_id in ids if ids.count(case_id) > 1}
    if duplicates:
        raise CaseFileError(f"duplicate case ids: {', '.join(sorted(duplicates))}")
    return cases


def select(cases: list[Case], parts: list[str], pattern: str | None = None) -> list[Case]:
    """The cases of the given parts whose id matches the glob pattern (all if none)."""
    return [
        case
        for case in cases
        if case.part in parts and (not pattern or fnmatch.fnmatchcase(case.id, pattern))
    ]


def _load_file(path: Path, part: str) -> list[Case]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise CaseFileError(f"{path}: {error}") from None
    return [_case(path, part, entry) for entry in raw.get("case", [])]


def _case(path: Path, part: str, entry: dict) -> Case:
    case_id = entry.get("id", "?")
    where = f"{path.name}: case '{case_id}'"
    unknown = set(entry) - _CASE_KEYS
    if unknown:
        raise CaseFileError(f"{where}: unknown key {sorted(unknown)[0]}")
    if not case_id.startswith(f"{part}."):
        raise CaseFileError(f"{where}: ids in {path.name} start with '{part}.'")
    if entry.get("level", "must") not in ("must", "should"):
        raise CaseFileError(f"{where}: level is 'must' or 'should'")
    steps = entry.get("steps") or (
        [{"request": entry["request"], "expect": entry.get("expect", {})}]
        if "request" in entry
        else []
    )
    if bool(steps) == bool(entry.get("check")):
        raise CaseFileError(f"{where}: give either request/steps or a check")
    for step in steps:
        for key, allowed in (("request", REQUEST_KEYS), ("expect", EXPECT_KEYS)):
            bad = set(step.get(key, {})) - allowed
            if bad:
                raise CaseFileError(f"{where}: unknown {key} key {sorted(bad)[0]}")
    return Case(
        id=case_id,
        part=part,
        about=entry.get("about", ""),
        level=entry.get("level", "must"),
        bad_input=entry.get("bad_input", False),
        records=entry.get("records", False),
        steps=tuple(Step(step["request"], step.get("expect", {})) for step in steps),
        check=entry.get("check", ""),
        params=entry.get("params", {}),
    )
