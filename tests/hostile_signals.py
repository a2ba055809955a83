"""Fills a runtime-signals side file with what a hostile or broken runtime could write,
before the server starts (tests/test_signals.py puts it in front of the reference server).

    python hostile_signals.py PATH KIND

- `lines`: good lines around a JSON line nested 200,000 deep, a JVM GC pause dated
  2026-99-99 and a value too large for a float;
- `flood`: 64 MiB of valid lines, each with a 200-character string value.
"""

import sys
import time

MIB = 1 << 20
DEPTH = 200_000
BAD_DATE = (
    "[2026-99-99T18:00:02.004+0000][1.016s][info][gc] "
    "GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->3M(256M) 4.000ms"
)


def good(t: float, value: int, extra: str = "") -> bytes:
    return f'{{"t": {t:.4f}, "kind": "heap_used", "value": {value}{extra}}}\n'.encode()


def hostile_lines(now: float) -> bytes:
    deep = "[" * DEPTH + "]" * DEPTH
    return b"".join(
        [
            good(now, 1),
            f'{{"t": {now}, "kind": "gc_pause", "value": 1, "x": {deep}}}\n'.encode(),
            BAD_DATE.encode() + b"\n",
            f'{{"t": {now}, "kind": "gc_pause", "value": 1{"0" * 400}}}\n'.encode(),
            good(now + 0.5, 2),
        ]
    )


def flood(now: float) -> bytes:
    # A block of distinct lines repeated: one second of samples, up to 64 MiB.
    note = ', "note": "' + "x" * 200 + '"'
    block = b"".join(good(now + i / 1000, i, note) for i in range(1000))
    return block * (64 * MIB // len(block))


if __name__ == "__main__":
    path, kind = sys.argv[1], sys.argv[2]
    with open(path, "wb") as out:
        out.write({"lines": hostile_lines, "flood": flood}[kind](time.time()))
