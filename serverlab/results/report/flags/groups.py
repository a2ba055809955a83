"""Flags grouped by kind: one line per flag code over a set of tests (a row's repeats), with
the repeats that carry it as ranges and, where the kind has a size, the range of its sizes:
"not steady: r1–r6, +17 % to +72 %" rather than six sentences that differ by a number.

The size of a kind is read from the same stored figures its flag is made from
(``serverlab.results.report.figures.table``), never parsed back out of the flag's text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import serverlab.results.report.figures.push as push
from serverlab.results.records import RecordedTest
from serverlab.results.report.figures.table import error_count, median_engine_cpu
from serverlab.results.report.flags.validity import Flag, steady_change, validity_flags


@dataclass(frozen=True)
class Size:
    """How to read and print the size of one kind of flag."""

    of: Callable[[RecordedTest], float | None]
    unit: str  # after each end of the range: "%", "ms"
    said: str = ""  # after the range: "of a core used by others"
    said_of_one: str = ""  # after a range that is exactly 1, where it differs: "error"
    signed: bool = False
    # What the sizes are made of, named after the range: the kinds of error, say.
    parts: Callable[[RecordedTest], list[str]] = lambda test: []


def _busy_percent(test: RecordedTest) -> float | None:
    other = (test.run_info.get("kernel") or {}).get("other_cpu_percent")
    return float(other) if isinstance(other, int | float) else None


def _steady_percent(test: RecordedTest) -> float | None:
    change = steady_change(test)
    return None if change is None else 100 * change


def _error_kinds(test: RecordedTest) -> list[str]:
    errors = (test.summary or {}).get("errors")
    if not isinstance(errors, dict):
        return []
    return [kind for kind, count in sorted(errors.items()) if count]


def _achieved_percent(test: RecordedTest) -> float | None:
    summary = test.summary or {}
    intended, achieved = summary.get("intended_rate"), summary.get("achieved_rate")
    if not isinstance(achieved, int | float) or not isinstance(intended, int | float):
        return None
    return 100 * achieved / intended if intended else None


SIZES: dict[str, Size] = {
    "not-steady": Size(_steady_percent, "%", signed=True),
    "machine-busy": Size(_busy_percent, "%", "of a core used by others"),
    "generator-bound": Size(median_engine_cpu, "%", "engine CPU"),
    "control-late": Size(push.control_late_ms, "ms", "late"),
    "errors": Size(error_count, "", "errors", "error", parts=_error_kinds),
    "rate-shortfall": Size(_achieved_percent, "%", "of the intended rate achieved"),
}


@dataclass(frozen=True)
class FlagGroup:
    """One kind of flag over a set of tests: the repeats (0-based) that carry it, the size
    each of them had (where the kind has one), and the distinct texts in repeat order."""

    code: str
    repeats: tuple[int, ...]
    sizes: tuple[float, ...]
    texts: tuple[str, ...]
    parts: tuple[str, ...] = ()  # what the sizes are made of (Size.parts), over the repeats

    @property
    def kind(self) -> str:
        return self.code.replace("-", " ")

    @property
    def repeat_text(self) -> str:
        return repeat_ranges(self.repeats)

    @property
    def text(self) -> str:
        """ "not steady: r1–r6, +17 % to +72 %"; a kind without a size keeps its one text
        ("crashed (at 3.5 s, signal 9) (r5)"), or each of its texts with their repeats."""
        size = SIZES.get(self.code)
        if size is not None and self.sizes:
            parts = f" ({', '.join(self.parts)})" if self.parts else ""
            return f"{self.kind}: {self.repeat_text}, {size_range(self.sizes, size)}{parts}"
        if len(self.texts) == 1:
            return f"{self.texts[0]} ({self.repeat_text})"
        # Texts that differ by their figures: the first, and how many more (all in the test
        # list and the cells' hover).
        more = len(self.texts) - 1
        return f"{self.kind}: {self.repeat_text}; {self.texts[0]}; {more} more alike"

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "repeats": [f"r{r + 1}" for r in self.repeats],
            "sizes": [round(size, 2) for size in self.sizes],
            "unit": SIZES[self.code].unit if self.code in SIZES else "",
            "text": self.text,
        }


def group_flags(
    tests: Sequence[RecordedTest], keep: Callable[[Flag], bool] = lambda flag: True
) -> list[FlagGroup]:
    """The kinds of flag the tests carry (those `keep` accepts), each once, in code order."""
    found: dict[str, dict[int, list[Flag]]] = {}
    by_repeat = {}
    for test in tests:
        by_repeat[test.repeat_index] = test
        for flag in validity_flags(test):
            if keep(flag):
                found.setdefault(flag.code, {}).setdefault(test.repeat_index, []).append(flag)
    return [_group(code, found[code], by_repeat) for code in sorted(found)]


def _group(code: str, flags: dict[int, list[Flag]], tests: dict[int, RecordedTest]) -> FlagGroup:
    repeats = tuple(sorted(flags))
    size = SIZES.get(code)
    sizes = (
        () if size is None else tuple(v for r in repeats if (v := size.of(tests[r])) is not None)
    )
    texts = dict.fromkeys(flag.text for r in repeats for flag in flags[r])
    parts = (
        ()
        if size is None
        else tuple(dict.fromkeys(p for r in repeats for p in size.parts(tests[r])))
    )
    if len(texts) > 1 and not sizes:
        # Several texts of a kind without a size: each with the repeats that carry it.
        texts = {
            text: f"{text} ({repeat_ranges([r for r in repeats if text in _texts(flags[r])])})"
            for text in texts
        }
        return FlagGroup(code, repeats, sizes, tuple(texts.values()))
    return FlagGroup(code, repeats, sizes, tuple(texts), parts)


def _texts(flags: list[Flag]) -> set[str]:
    return {flag.text for flag in flags}


def repeat_ranges(repeats: Sequence[int]) -> str:
    """0-based repeats as people count them, runs joined: [0, 1, 2, 4, 5] -> "r1–r3, r5, r6"."""
    runs: list[list[int]] = []
    for repeat in sorted(set(repeats)):
        if runs and repeat == runs[-1][-1] + 1:
            runs[-1].append(repeat)
        else:
            runs.append([repeat])
    # Two in a row are a list ("r1, r2"), three or more a range.
    return ", ".join(
        f"r{run[0] + 1}–r{run[-1] + 1}" if len(run) > 2 else ", ".join(f"r{r + 1}" for r in run)
        for run in runs
    )


def size_range(values: Sequence[float], size: Size) -> str:
    """ "+17 % to +72 % request rate, ...", or one value when they all print the same."""
    ends = dict.fromkeys(
        f"{v:+,.0f}" if size.signed else f"{v:,.0f}" for v in (min(values), max(values))
    )
    unit = f" {size.unit}" if size.unit else ""
    one = list(ends) == ["1"] and size.said_of_one
    said = f" {size.said_of_one if one else size.said}" if size.said else ""
    return " to ".join(f"{end}{unit}" for end in ends) + said
