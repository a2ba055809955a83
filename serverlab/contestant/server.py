"""One running contestant: ports, workdir, placeholder expansion, start, readiness, stop.

`ContestantServer` is a context manager; the suite runner and monitor build on it. The
server runs `/bin/sh -c <start>` in the contestant's folder in a session of its own, marked
as ours (serverlab.base.owner), so that stopping it (SIGTERM to the group, then SIGKILL) leaves
no process behind, and a later run reaps it if this process dies first.
"""

import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from serverlab.base import httpclient, owner, scratch
from serverlab.base.ports import free_port, port_open
from serverlab.base.tlskeys import DEFAULT_KEY_TYPE, KeyMaterial, make_key_material
from serverlab.contestant.manifest import Manifest
from serverlab.contestant.placeholders import KEY_PARTS, PART_PLACEHOLDERS, render_command
from serverlab.contestant.tunables import TunableValueError

LOG_FILE = "server.log"
LOG_TAIL_LINES = 20
# The runtime signals side file ({signals_file}), in the workdir beside the log.
SIGNALS_FILE = "signals.jsonl"
# The run's throwaway CA, certificate and key (spec §12), in the workdir: gone with it.
TLS_FOLDER = "tls"


# Every server listens here; a lab or cluster host adds its own address ({host}).
LOOPBACK = "127.0.0.1"


class ServerError(Exception):
    """The server could not be started or configured; the message says why."""


class UnknownTunableError(ServerError):
    pass


@dataclass(frozen=True)
class ExitStatus:
    code: int | None  # exit code, or None if ended by a signal
    signal: int | None

    @classmethod
    def from_returncode(cls, code: int) -> "ExitStatus":
        if code < 0:
            return cls(code=None, signal=-code)
        # `sh -c` that did not exec reports a child killed by signal N as 128 + N.
        if code > 128 and code - 128 in signal.valid_signals():
            return cls(code=None, signal=code - 128)
        return cls(code=code, signal=None)

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by signal {signal.Signals(self.signal).name}"
        return f"exit code {self.code}"


def resolve_settings(manifest: Manifest, overrides: dict[str, str] | None) -> dict[str, str]:
    """Tunable values: defaults with `overrides` applied. An unknown tunable, or a value its
    type does not accept, is an error before anything starts."""
    settings = {name: tunable.default for name, tunable in manifest.tunables.items()}
    for key, value in (overrides or {}).items():
        if key not in settings:
            known = ", ".join(sorted(settings)) or "none"
            raise UnknownTunableError(f"{manifest.name} has no tunable '{key}' (known: {known})")
        try:
            manifest.tunables[key].render(str(value))
        except TunableValueError as error:
            raise ServerError(f"{manifest.name}: {error}") from None
        settings[key] = str(value)
    return settings


def placeholder_values(manifest: Manifest, settings: dict[str, str], **builtins) -> dict:
    """Every placeholder's value: tunables written as the server wants them, then the
    built-ins (port, syslog_port, docroot, workdir, signals_file)."""
    values = {name: manifest.tunables[name].render(v) for name, v in settings.items()}
    return {**values, **{k: str(v) for k, v in builtins.items()}, "name": manifest.name}


def parse_assignments(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`key=value` strings (from `--set`) as a dict; ServerError for one without '='."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ServerError(f"expected key=value, got '{pair}'")
        settings[key.strip()] = value
    return settings


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return log_tail_text(text, lines)


def log_tail_text(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:]) or "(no output)"


def _ip_literal(host: str) -> list[str]:
    """[host] when it is an IP address (a certificate names addresses as such), else []."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return []
    return [host]


class ContestantServer:
    def __init__(
        self,
        manifest: Manifest,
        *,
        port: int | None = None,
        syslog_port: int | None = None,
        docroot: Path | None = None,
        workdir: Path | None = None,
        settings: dict[str, str] | None = None,
        cpus: str | None = None,
        stop_grace_s: float = 5.0,
        host: str = LOOPBACK,
        tls_key_type: str = DEFAULT_KEY_TYPE,
    ):
        self.manifest = manifest
        # Another address the server listens on besides loopback: a lab or cluster host's.
        self.host = host
        self.settings = resolve_settings(manifest, settings)
        self.port = port or free_port()
        self.syslog_port = syslog_port or free_port(also_udp=True, avoid={self.port})
        # Ports of the parts it claims only: a server without `tls` is given no TLS port.
        self.part_ports = _part_ports(manifest, {self.port, self.syslog_port})
        self.tls_key_type = tls_key_type
        self.tls: KeyMaterial | None = None
        self._owned_workdir = workdir is None
        self.workdir = Path(workdir or scratch.make(f"{manifest.name}-"))
        self.docroot = Path(docroot) if docroot else self.workdir / "docroot"
        self.cpus = cpus
        self.stop_grace_s = stop_grace_s
        self.process: subprocess.Popen | None = None
        self.exit_status: ExitStatus | None = None
        self.log_path = self.workdir / LOG_FILE

    # -- placeholders ------------------------------------------------------------------
    def placeholder_values(self) -> dict[str, str]:
        return placeholder_values(
            self.manifest,
            self.settings,
            port=self.port,
            syslog_port=self.syslog_port,
            host=self.host,
            docroot=self.docroot,
            workdir=self.workdir,
            signals_file=self.signals_path,
            **self.part_ports,
            **self._tls_files(),
        )

    def _tls_files(self) -> dict[str, Path]:
        if not self.serves_tls:
            return {}
        folder = self.workdir / TLS_FOLDER
        return {"tls_cert": folder / "server.pem", "tls_key": folder / "server.key"}

    @property
    def serves_tls(self) -> bool:
        """Whether it claims a part served with the run's key material (spec §12, §15)."""
        return bool(KEY_PARTS & set(self.manifest.implements))

    @property
    def tls_port(self) -> int | None:
        return self.part_ports.get("tls_port")

    @property
    def h2c_port(self) -> int | None:
        return self.part_ports.get("h2c_port")

    @property
    def grpc_port(self) -> int | None:
        """Where its gRPC calls are served in cleartext (spec §16): the h2c port, or the
        gRPC server's own."""
        if "grpc" not in self.manifest.implements:
            return None
        return self.part_ports.get("grpc_port", self.h2c_port)

    @property
    def grpc_tls_port(self) -> int | None:
        """Where its gRPC calls are served over TLS, by ALPN h2; None if nowhere."""
        if "grpc" not in self.manifest.implements:
            return None
        if self.manifest.grpc_listener == "own":
            return self.part_ports.get("grpc_tls_port")
        return self.tls_port if "h2" in self.manifest.implements else None

    @property
    def syslog_tls_port(self) -> int | None:
        return self.part_ports.get("syslog_tls_port")

    @property
    def signals_path(self) -> Path:
        return self.workdir / SIGNALS_FILE

    def expand(self, template: str) -> str:
        """A manifest command with every value quoted for the shell."""
        return render_command(template, self.placeholder_values())

    @property
    def start_command(self) -> str:
        return self.expand(self.manifest.start)

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()
        self.cleanup()

    def start(self) -> None:
        """Starts the server and waits until it is ready; ServerError (with log tail) if not."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.docroot.mkdir(parents=True, exist_ok=True)
        if self.serves_tls and self.tls is None:
            # Made once per server: a restart after a crash serves the same certificate,
            # which names the address remote generators reach it at besides loopback.
            self.tls = make_key_material(
                self.workdir / TLS_FOLDER, self.tls_key_type, _ip_literal(self.host)
            )
        argv = ["/bin/sh", "-c", self.start_command]
        if self.cpus:
            argv = ["taskset", "-c", self.cpus, *argv]
        self.exit_status = None
        try:
            with open(self.log_path, "ab") as log:
                self.process = owner.popen(
                    argv,
                    cwd=self.manifest.folder,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            self._wait_ready()
        except BaseException:
            # Not ready, or Ctrl-C while waiting: a server no caller holds must not live on.
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.manifest.ready_timeout_s
        while time.monotonic() < deadline:
            if self.poll() is not None:
                raise ServerError(
                    f"{self.manifest.name} exited before it was ready "
                    f"({self.exit_status.describe()}); log {self.log_path}:\n"
                    f"{log_tail(self.log_path)}"
                )
            if self.is_ready():
                return
            time.sleep(0.05)
        raise ServerError(
            f"{self.manifest.name} was not ready after {self.manifest.ready_timeout_s:g} s "
            f"(ready = {self.manifest.ready!r}); log {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def is_ready(self) -> bool:
        ready = self.manifest.ready
        if ready == "tcp":
            return port_open(self.port if self.manifest.speaks_http else self.syslog_port)
        try:
            return httpclient.get(self.port, ready, timeout_s=1.0).status == 200
        except httpclient.HttpError:
            return False

    def poll(self) -> ExitStatus | None:
        """The exit status if the server has ended, else None."""
        if self.process is None:
            return self.exit_status
        code = self.process.poll()
        if code is not None and self.exit_status is None:
            self.exit_status = ExitStatus.from_returncode(code)
        return self.exit_status

    @property
    def alive(self) -> bool:
        return self.process is not None and self.poll() is None

    def stop(self) -> ExitStatus | None:
        """SIGTERM to the process group, SIGKILL after the grace period; reaps everything."""
        if self.process is None:
            return self.exit_status
        descendants = _descendants(self.process.pid)
        _signal_group(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=self.stop_grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait()
        # Children that left the group (setsid) or ignored SIGTERM are not left behind.
        _signal_group(self.process.pid, signal.SIGKILL)
        gone, alive = psutil.wait_procs(descendants, timeout=self.stop_grace_s)
        for process in alive:
            _kill_quietly(process)
        psutil.wait_procs(alive, timeout=self.stop_grace_s)
        self.poll()
        self.process = None
        return self.exit_status

    def cleanup(self) -> None:
        """Removes the workdir if this object made it."""
        if self._owned_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- talking to it -------------------------------------------------------------------
    def stats(self, timeout_s: float = 5.0) -> dict:
        """GET /stats as a dict; HttpError if it does not answer 200 with JSON."""
        response = httpclient.get(self.port, "/stats", timeout_s=timeout_s)
        if response.status != 200:
            raise httpclient.HttpError(f"GET /stats answered {response.status}")
        return response.json()


def _part_ports(manifest: Manifest, taken: set[int]) -> dict[str, int]:
    """A free port for each port placeholder of the parts the manifest claims."""
    names = [name for part in manifest.implements for name in PART_PLACEHOLDERS.get(part, ())]
    ports = {}
    for name in [*names, *manifest.grpc_own_ports()]:
        if name.endswith("_port") and name not in ports:
            ports[name] = free_port(avoid=taken | set(ports.values()))
    return ports


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _kill_quietly(process: psutil.Process) -> None:
    with contextlib.suppress(psutil.Error):
        process.kill()
