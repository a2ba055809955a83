"""Network namespaces of our own: made and deleted with iproute2, entered with setns(2) by
a thread that then opens its sockets there. Shaped links (serverlab.run.host.shapedlink) and the
virtual lab (serverlab.lab) are built from these, and nothing in them has a route out."""

from __future__ import annotations

import ctypes
import os
import shlex
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

NETNS_DIR = Path("/var/run/netns")
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


class NetnsError(RuntimeError):
    """A namespace could not be made or set up; the message names the failing command."""


@dataclass
class Namespace:
    name: str
    _executor: ThreadPoolExecutor | None = field(default=None, repr=False)

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def shell(self, script: str) -> str:
        """A `/bin/sh -c` script that runs `script` inside the namespace."""
        return f"exec ip netns exec {self.name} /bin/sh -c {shlex.quote(script)}"

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Runs `function` on a thread that lives in the namespace: sockets it makes are
        on the namespace's interfaces."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=self.name, initializer=enter, initargs=(self,)
            )
        return self._executor.submit(function, *args, **kwargs).result()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None


def enter(namespace: Namespace) -> None:
    """Moves the calling thread into the namespace (setns): its new sockets are there."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(namespace.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(f"setns({namespace.path}) failed: {os.strerror(err)}")
    finally:
        os.close(fd)


def ip(argv: list[str]) -> None:
    """Runs an iproute2 (or tc) command; a failure is a NetnsError naming it."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise NetnsError(f"{shlex.join(argv)}: {err}") from err
    if done.returncode != 0:
        hint = " (network namespaces need root and iproute2)" if os.geteuid() != 0 else ""
        raise NetnsError(f"{shlex.join(argv)} failed: {done.stderr.strip()}{hint}")


def delete(name: str) -> None:
    subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def pids(name: str) -> list[int]:
    """The processes inside a namespace (`ip netns pids`): whatever their parent or
    environment, a process that lives there is found."""
    try:
        out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    except OSError:
        return []
    return [int(word) for word in out.stdout.split() if word.isdigit()]


def existing() -> list[str]:
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    except OSError:
        return []  # no iproute2: no namespace of ours can exist either
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]
