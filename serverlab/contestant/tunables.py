"""Typed tunables: what values a contestant's `[tunables.NAME]` accepts, and how the server
wants each written on its command line.

A value is checked before any server starts (a suite's `tunables`, `serve --set`), so a
mistyped value is a file:line error rather than a server that fails to start, and no value
can carry shell syntax into a start command unnoticed. The types:

- `int`: an integer, optionally within `min`..`max`;
- `number`: a finite decimal, optionally within `min`..`max`;
- `size`: digits with an optional K, M or G suffix (a trailing B is allowed), written the
  way `write` says: `jvm` (`2400m`), `kb` (`512KB`) or `bytes` (`524288`);
- `word`: one of `words`;
- `path`: any file system path (spaces and quotes included);

`int`, `number` and `size` also accept the fixed `words` beside their numbers, for unions
such as zhtta's `cache` ("off" or a size in MB).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

TYPES = ("int", "number", "size", "word", "path")
SIZE_WRITES = ("jvm", "kb", "bytes")
_INT = re.compile(r"[+-]?\d+")
_SIZE = re.compile(r"(\d+)\s*([kmg]?)b?", re.IGNORECASE)
_SIZE_FACTORS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class TunableValueError(ValueError):
    """A value the tunable's type does not accept; the message says what it accepts."""


@dataclass(frozen=True)
class Tunable:
    name: str
    default: str
    type: str
    help: str = ""
    words: tuple[str, ...] = ()
    min: float | None = None
    max: float | None = None
    write: str = "bytes"

    def render(self, value: str) -> str:
        """The value as the server's command line wants it; TunableValueError if the type
        does not accept it."""
        value = str(value)
        if value in self.words:
            return value
        if self.type == "word":
            raise self._refuse(value)
        if self.type == "path":
            if not value or "\0" in value:
                raise TunableValueError(f"{self.name}: a path must be non-empty, without NUL")
            return value
        return _RENDERERS[self.type](self, value)

    def describe(self) -> str:
        """What the type accepts, for error messages and `serverlab contestants`."""
        if self.type == "word":
            return "one of " + ", ".join(self.words)
        kind = {"int": "an integer", "number": "a number", "size": "a size like 512K or 2G"}
        text = kind.get(self.type, "a path")
        if self.min is not None or self.max is not None:
            low = "" if self.min is None else self._show(self.min)
            high = "" if self.max is None else self._show(self.max)
            text += f" in {low}..{high}"
        return text + "".join(f" or {word!r}" for word in self.words)

    def _show(self, bound: float) -> str:
        if self.type == "size":
            for unit, factor in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
                if bound >= factor and bound % factor == 0:
                    return f"{int(bound // factor)}{unit}"
        return str(int(bound)) if bound == int(bound) else f"{bound:g}"

    def _refuse(self, value: str) -> TunableValueError:
        return TunableValueError(f"{self.name} = {value!r}: expected {self.describe()}")

    def _in_range(self, value: str, number: float) -> None:
        low = -math.inf if self.min is None else self.min
        high = math.inf if self.max is None else self.max
        if not low <= number <= high:
            raise self._refuse(value)


def _render_int(tunable: Tunable, value: str) -> str:
    if not _INT.fullmatch(value.strip()):
        raise tunable._refuse(value)
    number = int(value)
    tunable._in_range(value, number)
    return str(number)


def _render_number(tunable: Tunable, value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        raise tunable._refuse(value) from None
    if not math.isfinite(number):
        raise tunable._refuse(value)
    tunable._in_range(value, number)
    return f"{number:g}" if number != int(number) else str(int(number))


def _render_size(tunable: Tunable, value: str) -> str:
    found = _SIZE.fullmatch(value.strip())
    if not found:
        raise tunable._refuse(value)
    digits, unit = int(found.group(1)), found.group(2).lower()
    tunable._in_range(value, digits * _SIZE_FACTORS[unit])
    if tunable.write == "bytes" or not unit:
        return str(digits * _SIZE_FACTORS[unit])
    return f"{digits}{unit}" if tunable.write == "jvm" else f"{digits}{unit.upper()}B"


_RENDERERS = {"int": _render_int, "number": _render_number, "size": _render_size}


def size_bytes(text: str) -> int | None:
    """A size written like `512K` in bytes, or None if it is not one (manifest bounds)."""
    found = _SIZE.fullmatch(text.strip())
    if not found:
        return None
    return int(found.group(1)) * _SIZE_FACTORS[found.group(2).lower()]
