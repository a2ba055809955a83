"""The spec's version, read from the `spec_version = "MAJOR.MINOR"` line of spec/SPEC.md, so
that verify and the runner's smoke check follow the text instead of a copy of it."""

import functools
import re

from serverlab.paths import spec_file

_VERSION_LINE = re.compile(r'^spec_version = "(\d+\.\d+)"$', re.MULTILINE)


class SpecVersionError(Exception):
    pass


@functools.cache
def spec_version() -> str:
    path = spec_file()
    try:
        match = _VERSION_LINE.search(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SpecVersionError(f"cannot read {path}: {error}") from None
    if not match:
        raise SpecVersionError(f'{path} has no line spec_version = "MAJOR.MINOR"')
    return match.group(1)


def same_major(version: str) -> bool:
    """True if `version` (as a server reports it) has the spec's MAJOR."""
    return str(version).split(".")[0] == spec_version().split(".")[0]
