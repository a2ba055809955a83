"""TOML read with a bound on nesting, for the files a user writes (suites, manifests).

Python's tomllib parses arrays and inline tables by recursion, and a file nested some
hundreds deep ends in a RecursionError thousands of lines long; a table nested thousands
deep by dotted keys (`a.b.c...`) parses, and then fails wherever it is printed. No suite
needs more than a handful of levels, so the raw text is scanned first, ignoring strings and
comments: headers, dotted keys, arrays and inline tables all count, and a file deeper than
MAX_DEPTH is refused as a TOMLDecodeError at the line where it goes too deep.
"""

from __future__ import annotations

import tomllib
from typing import Any

MAX_DEPTH = 100
_QUOTES = ('"""', "'''", '"', "'")


def loads(text: str) -> dict[str, Any]:
    """tomllib.loads, after refusing nesting deeper than MAX_DEPTH."""
    _Scanner(text).scan()
    return tomllib.loads(text)


class _Scanner:
    """One pass over the text. `stack` holds, for each open array or inline table, its kind
    and the depth of its own elements; `base` is the depth of the current [table]."""

    def __init__(self, text: str):
        self.text, self.pos, self.base = text, 0, 0
        self.stack: list[tuple[str, int]] = []

    def scan(self) -> None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t\r\n,":
                self.pos += 1
            elif ch == "#":
                self._skip_comment()
            elif ch in "\"'":
                self._skip_string()
            elif not self.stack and ch == "[" and self._at_line_start():
                self._header()
            elif not self.stack or self.stack[-1][0] == "{":
                self._key_then_value()
            elif ch in "]}":
                self.stack.pop()
                self.pos += 1
            else:
                self._value(self.stack[-1][1])

    def _key_then_value(self) -> None:
        """A key (dotted or not) up to its `=`, then the value it names; or the `}` that
        closes an inline table."""
        if self.text[self.pos] == "}" and self.stack:
            self.stack.pop()
            self.pos += 1
            return
        parts = self._key_parts("=")
        if not self.text.startswith("=", self.pos):
            return  # not a key-value pair: tomllib says what is wrong
        self.pos += 1
        depth = (self.stack[-1][1] if self.stack else self.base) + parts
        self._check(depth)
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        self._value(depth)

    def _value(self, depth: int) -> None:
        """One value at `depth`: an array or inline table opens a level, anything else
        (a number, a date, a word) is passed over."""
        ch = self.text[self.pos : self.pos + 1]
        if ch and ch in "[{":
            self._check(depth + 1)
            self.stack.append((ch, depth + 1 if ch == "[" else depth))
            self.pos += 1
        elif ch and ch in "\"'":
            self._skip_string()
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in " \t\r\n,]}#":
                self.pos += 1

    def _header(self) -> None:
        """`[a.b]` or `[[a.b]]`: the tables under it start that deep (an array of tables
        one deeper, for its elements)."""
        double = self.text.startswith("[[", self.pos)
        self.pos += 2 if double else 1
        self.base = self._key_parts("]") + int(double)
        self._check(self.base)
        self.pos += 2 if double else 1

    def _key_parts(self, end: str) -> int:
        """How many dotted parts the key up to `end` has; quoted parts may hold dots."""
        parts = 1
        while self.pos < len(self.text) and self.text[self.pos] not in end + "\n":
            if self.text[self.pos] in "\"'":
                self._skip_string()
                continue
            parts += self.text[self.pos] == "."
            self.pos += 1
        return parts

    def _skip_string(self) -> None:
        quote = next(q for q in _QUOTES if self.text.startswith(q, self.pos))
        start = end = self.pos + len(quote)
        while True:
            end = self.text.find(quote, end)
            if end < 0 or (len(quote) == 1 and "\n" in self.text[start:end]):
                newline = self.text.find("\n", start)
                self.pos = len(self.text) if newline < 0 else newline
                return  # unterminated: tomllib says where
            if quote[0] == "'" or not _escaped(self.text, end):
                break
            end += 1
        # A multi-line string may end in one or two quotes of its own (`"a""""`): the
        # closing three are the last of the run.
        run = len(quote)
        while len(quote) == 3 and run < 5 and self.text.startswith(quote[0], end + run):
            run += 1
        self.pos = end + run

    def _skip_comment(self) -> None:
        newline = self.text.find("\n", self.pos)
        self.pos = len(self.text) if newline < 0 else newline

    def _at_line_start(self) -> bool:
        line_start = self.text.rfind("\n", 0, self.pos) + 1
        return not self.text[line_start : self.pos].strip()

    def _check(self, depth: int) -> None:
        if depth > MAX_DEPTH:
            line = self.text.count("\n", 0, self.pos) + 1
            raise tomllib.TOMLDecodeError(
                f"nested deeper than {MAX_DEPTH} levels (at line {line}): "
                "arrays, inline tables and dotted keys all count"
            )


def _escaped(text: str, index: int) -> bool:
    """Whether the quote at `index` is escaped by an odd run of backslashes."""
    run = 0
    while index - run - 1 >= 0 and text[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1
