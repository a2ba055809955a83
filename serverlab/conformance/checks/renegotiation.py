"""A renegotiation started by the client (spec §12): refused, never a second handshake.

Python's `ssl` cannot renegotiate, so the client is OpenSSL's own `openssl s_client`, a
real TLS 1.2 client: after its handshake it is sent `R` on its standard input, which makes
it send a new ClientHello on the open connection. Its `-msg` trace says what came back: a
second ServerHello and Finished (the renegotiation was accepted), an alert, or a close.
"""

import queue
import shutil
import subprocess
import threading
import time

from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

CLOSE_WITHIN_S = 2.0
LATE = "late"  # no line by the deadline (s_client prints empty lines of its own)


class SClient:
    """`openssl s_client -tls1_2 -msg` to the TLS port, its trace read line by line."""

    def __init__(self, ctx: VerifyContext):
        openssl = shutil.which("openssl")
        if openssl is None:
            raise FileNotFoundError(
                "the renegotiation case needs the openssl command (Debian openssl)"
            )
        command = [openssl, "s_client", "-tls1_2", "-msg", "-connect", f"127.0.0.1:{ctx.tls_port}"]
        command += ["-servername", "localhost", "-CAfile", str(ctx.server.tls.ca_cert)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, deadline: float) -> str | None:
        """The next line of the trace; LATE at the deadline; None once s_client has ended."""
        try:
            return self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return LATE

    def command(self, letter: str) -> None:
        self.process.stdin.write(letter + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.reader.join()  # it reads to the end of the dead process's output
        self.process.stdout.close()
        self.process.stdin.close()


def _server_finished(line: str) -> bool:
    return line.startswith("<<< ") and line.endswith(", Finished")


def _handshake(client: SClient, deadline: float) -> bool:
    """True once the server's Finished of the first handshake has come."""
    while (line := client.next_line(deadline)) not in (LATE, None):
        if _server_finished(line):
            return True
    return False


def _renegotiation(client: SClient, deadline: float) -> str:
    """What the server did with the new ClientHello: "accepted" (a second ServerHello and
    Finished), "alert <level> <name>", "closed", or "no answer"."""
    hello = False
    while True:
        line = client.next_line(deadline)
        if line == LATE:
            return "no answer" if not hello else "a ServerHello, then nothing"
        if line is None:
            return "closed"
        if line.startswith("<<< ") and ", Alert " in line:
            return "alert " + line.rsplit("], ", 1)[-1]
        hello = hello or (line.startswith("<<< ") and line.endswith(", ServerHello"))
        if hello and _server_finished(line):
            return "accepted"


def tls_renegotiation(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """TLS 1.2, then a renegotiation started by the client: never a second handshake (a
    client could make the server pay for handshakes at will: MUST), and an alert or a close
    within 2 s (SHOULD)."""
    try:
        client = SClient(ctx)
    except OSError as error:
        outcome.abort(str(error))
    try:
        if not _handshake(client, time.monotonic() + ctx.timeout_s):
            outcome.abort("openssl s_client did not complete a TLS 1.2 handshake")
        client.command("R")
        answer = _renegotiation(client, time.monotonic() + CLOSE_WITHIN_S + ctx.give_up_s)
    finally:
        client.close()
    outcome.observed.append(answer)
    if answer == "accepted":
        outcome.fail("a renegotiation started by the client was accepted (a second handshake)")
    elif not answer.startswith(("alert", "closed")):
        # No second handshake, so not the lever; but the client is left hanging (Tomcat's
        # NIO connector answers nothing): a SHOULD.
        outcome.warn(f"a renegotiation started by the client got {answer}, not an alert or a close")


CHECKS = {"tls_renegotiation": tls_renegotiation}
