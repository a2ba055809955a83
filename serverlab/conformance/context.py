"""What a conformance case sees of the server under test."""

import re
import secrets
import ssl
import subprocess
from dataclasses import dataclass

from serverlab.base import httpclient
from serverlab.conformance.fixtures import Docroot
from serverlab.contestant.server import ContestantServer

_PLACEHOLDER = re.compile(r"\{(event\d?)\}")


def new_run_tag() -> str:
    """A short prefix that keeps this run's event names apart from any other's."""
    return "v" + secrets.token_hex(3)


@dataclass
class VerifyContext:
    server: ContestantServer
    docroot: Docroot
    run_tag: str
    case_id: str = ""
    timeout_s: float = 5.0
    # How long past its due time an answer or a count may come before verify gives up.
    give_up_s: float = 3.0
    # "tls" while a case of part `tls` carries another part's exchanges (spec §12).
    transport: str = "tcp"

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def parts(self) -> list[str]:
        return self.server.manifest.parts()

    def event_name(self, suffix: str = "") -> str:
        """An event name unique to this run and case (seq numbers never reset in a server)."""
        short = self.case_id.split(".", 1)[-1].replace("_", "-")[:40]
        return f"{self.run_tag}.{short}{suffix}"

    def substitute(self, value):
        """Replaces `{event}`, `{event2}`... in strings of a case's data by event names."""
        if isinstance(value, str):
            return _PLACEHOLDER.sub(lambda m: self.event_name(m.group(1)[5:]), value)
        if isinstance(value, list):
            return [self.substitute(item) for item in value]
        if isinstance(value, dict):
            return {key: self.substitute(item) for key, item in value.items()}
        return value

    def connect(self, timeout_s: float | None = None) -> httpclient.HttpConnection:
        timeout_s = timeout_s or self.timeout_s
        if self.transport == "tls":
            return httpclient.HttpConnection(
                "127.0.0.1", self.tls_port, timeout_s, tls=self.tls_context(["http/1.1"])
            )
        return httpclient.HttpConnection("127.0.0.1", self.port, timeout_s)

    def origin(self, scheme: str) -> str:
        """`http://127.0.0.1:<port>` (or `ws`), or its TLS form on the TLS port while a case
        of part `tls` carries another part's (spec §12)."""
        if self.transport == "tls":
            return f"{scheme}s://127.0.0.1:{self.tls_port}"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def tls_port(self) -> int:
        return self.server.tls_port

    @property
    def h2c_port(self) -> int:
        return self.server.h2c_port

    def grpc_port(self, transport: str) -> int | None:
        """Where gRPC is served over `transport` (h2c or h2), None if it is not (spec §16)."""
        return self.server.grpc_tls_port if transport == "h2" else self.server.grpc_port

    @property
    def syslog_tls_port(self) -> int:
        return self.server.syslog_tls_port

    def tls_context(self, alpn: list[str] | None = None) -> ssl.SSLContext:
        """A client context that trusts only the run's CA (spec §12), TLS 1.2 and up."""
        context = ssl.create_default_context(cafile=str(self.server.tls.ca_cert))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if alpn:
            context.set_alpn_protocols(alpn)
        return context

    def get(self, target: str) -> httpclient.Response:
        return httpclient.get(self.port, target, self.timeout_s)

    def post_json(self, target: str, payload) -> httpclient.Response:
        return httpclient.post_json(self.port, target, payload, self.timeout_s)

    @property
    def probe_target(self) -> str:
        for part, target in (
            ("perf", "/perf"),
            ("control", "/stats"),
            ("files", "/files/hello.txt"),
        ):
            if part in self.parts:
                return target
        return "/"

    def answers(self) -> bool:
        """True if the server still gives a complete HTTP answer on a new connection."""
        try:
            return self.get(self.probe_target).status < 500
        except httpclient.HttpError:
            return False

    def stats(self) -> dict:
        return self.server.stats(self.timeout_s)

    def syslog_counters(self) -> tuple[int, int | None]:
        """(messages received, their bytes or None) from /stats or the syslog_count command."""
        manifest = self.server.manifest
        if "control" in manifest.implements:
            syslog = self.stats()["syslog"]
            return syslog["received"], syslog["bytes"]
        command = self.server.expand(manifest.syslog_count)
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=manifest.folder,
            capture_output=True,
            text=True,
            timeout=self.timeout_s,
        )
        try:
            return int(done.stdout.split()[0]), None
        except (IndexError, ValueError):
            raise httpclient.HttpError(
                f"syslog_count printed {done.stdout[:60]!r}, not a count"
            ) from None
