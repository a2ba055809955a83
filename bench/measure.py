#!/usr/bin/env python3
"""Runs a command and writes its own CPU time and peak memory to a file: `measure.py OUT -- CMD...`.

The generator's CPU and peak resident set are read from wait4()'s rusage of the child (all
its threads), so no sampling error and no /usr/bin/time dependency. Writes
"user_s system_s exit_code max_rss_kib" to OUT; the command's stdout and stderr pass through
untouched.
"""

import os
import sys


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: measure.py OUT -- CMD [ARG...]", file=sys.stderr)
        return 2
    out_path, command = sys.argv[1], sys.argv[3:]
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as err:
            print(f"measure.py: cannot run {command[0]}: {err}", file=sys.stderr)
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(out_path, "w", encoding="utf-8") as out:
        out.write(f"{usage.ru_utime:.6f} {usage.ru_stime:.6f} {code} {usage.ru_maxrss}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
