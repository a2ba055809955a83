"""TLS posture on `{tls_port}` (spec §12): versions, ciphers, certificate, close_notify,
ALPN, resumption, and bad input before the handshake. `tls_handshake` and `tls_refused`
judge `{syslog_tls_port}` too (spec §15), when a case's params say `port = "syslog_tls"`.

Python's `ssl` is the client wherever it can be (it shares nothing with the engine's
rustls); the versions OpenSSL 3 no longer offers go as raw ClientHellos
(serverlab.conformance.checks.tlswire), each beside a TLS 1.2 hello of the same build that
the server must accept, so that a refusal is the server's and not a malformed hello.
"""

import socket
import ssl
import time

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

import serverlab.conformance.checks.tlswire as tlswire
from serverlab.base import httpclient
from serverlab.conformance.checks.receive import End, receive_all
from serverlab.conformance.context import VerifyContext
from serverlab.conformance.outcome import Outcome

TLS_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}
CLOSE_WITHIN_S = 2.0


def tls_client(ctx: VerifyContext, version: str | None = None, alpn=None) -> ssl.SSLContext:
    context = ctx.tls_context(alpn)
    if version:
        context.minimum_version = context.maximum_version = TLS_VERSIONS[version]
    return context


def target_port(ctx: VerifyContext, params: dict) -> int:
    """`{tls_port}`, or `{syslog_tls_port}` for a case of part `syslog-tls` (spec §15)."""
    return ctx.syslog_tls_port if params.get("port") == "syslog_tls" else ctx.tls_port


def handshake(
    ctx: VerifyContext, context: ssl.SSLContext, port: int | None = None, **options
) -> ssl.SSLSocket:
    """A TLS connection to the server (`{tls_port}` unless told another port); OSError (an
    SSLError) if the handshake fails."""
    raw = socket.create_connection(("127.0.0.1", port or ctx.tls_port), timeout=ctx.timeout_s)
    try:
        return context.wrap_socket(raw, server_hostname="127.0.0.1", **options)
    except BaseException:
        raw.close()
        raise


def tls_handshake(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A handshake of the given version succeeds and the certificate is `{tls_cert}`."""
    version = params["version"]
    try:
        sock = handshake(ctx, tls_client(ctx, version), target_port(ctx, params))
    except OSError as error:
        outcome.abort(f"a TLS {version} handshake failed: {error}")
    with sock:
        served = sock.getpeercert(binary_form=True)
        cipher = sock.cipher()
    outcome.observed.append(f"TLS {version} {cipher[0]}")
    given = x509.load_pem_x509_certificate(ctx.server.tls.cert.read_bytes())
    if served != given.public_bytes(Encoding.DER):
        outcome.fail("the certificate served is not the one given in {tls_cert}")


def tls_refused(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """A raw ClientHello (`version`, `suites`: "cbc" or "aead") gets no ServerHello."""
    port = target_port(ctx, params)
    _control_hello(ctx, port, outcome)
    suites = tlswire.AEAD_SUITES if params.get("suites") == "aead" else tlswire.CBC_SUITES
    hello = tlswire.client_hello(params["version"], suites)
    answer = tlswire.first_answer(port, hello, CLOSE_WITHIN_S + ctx.give_up_s)
    outcome.observed.append(answer)
    if answer.startswith("server_hello"):
        what = f"a TLS {params['version']} ClientHello offering {params.get('suites', 'cbc')}"
        outcome.fail(f"{what} suites was answered with a ServerHello ({answer})")
    elif answer == "silent":
        outcome.fail("the server neither refused nor answered the ClientHello")
    elif answer.startswith("other"):
        outcome.fail(f"answered with a record that is neither a ServerHello nor an alert: {answer}")


def _control_hello(ctx: VerifyContext, port: int, outcome: Outcome) -> None:
    """The same raw hello, as TLS 1.2 with AEAD suites, must be accepted: otherwise a
    refusal would prove nothing."""
    answer = tlswire.first_answer(
        port, tlswire.client_hello("1.2", tlswire.AEAD_SUITES), ctx.timeout_s
    )
    if answer != "server_hello 1.2":
        outcome.abort(f"verify's raw TLS 1.2 ClientHello with AEAD suites got {answer}")


def tls_close_notify(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """After a `Connection: close` answer the server sends close_notify before its FIN."""
    sock = handshake(ctx, tls_client(ctx, params.get("version")), suppress_ragged_eofs=False)
    request = f"GET {ctx.probe_target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    with sock:
        sock.sendall(request.encode())
        received, ending = read_to_end(sock, ctx.timeout_s + CLOSE_WITHIN_S)
    outcome.observed.append(ending)
    if not received.startswith(b"HTTP/1.1 "):
        outcome.fail(f"no HTTP/1.1 answer over TLS: {received[:60]!r}")
    elif ending != "close_notify":
        outcome.fail(f"the connection ended with {ending}, not close_notify")


def read_to_end(sock: ssl.SSLSocket, timeout_s: float) -> tuple[bytes, str]:
    """Everything until the end, and how it ended: close_notify (a clean TLS EOF), a TCP
    close without it, a reset, or still open."""
    received, end = receive_all(sock, time.monotonic() + timeout_s)
    return received, {
        End.CLOSED: "close_notify",
        End.UNCLEAN: "a TCP close without close_notify",
        End.RESET: "a reset",
    }.get(end, f"the connection still open after {timeout_s:g} s")


def tls_alpn(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """ALPN: http/1.1 when offered; h2 only for an h2 server; never an unoffered one."""
    h2 = "h2" in ctx.parts
    offers = (["http/1.1"], ["h2", "http/1.1"], ["h2"] if h2 else None, ["serverlab-none"])
    for offer in filter(None, offers):
        wanted = _alpn_wanted(offer, h2)
        try:
            with handshake(ctx, tls_client(ctx, alpn=offer)) as sock:
                chosen = sock.selected_alpn_protocol()
        except ssl.SSLError as error:
            chosen = "alert no_application_protocol" if "no application" in str(error) else ""
            if not chosen:
                outcome.fail(f"offering {offer}: the handshake failed: {error}")
                continue
        outcome.observed.append(f"{'+'.join(offer)}->{chosen}")
        if chosen not in wanted:
            outcome.fail(f"offering {offer} chose {chosen!r}, expected one of {wanted}")
    with httpclient.HttpConnection("127.0.0.1", ctx.tls_port, tls=ctx.tls_context()) as conn:
        if conn.request("GET", ctx.probe_target).status >= 500:
            outcome.fail("a client without ALPN was not served HTTP/1.1")


def _alpn_wanted(offer: list[str], h2: bool) -> list:
    if offer == ["serverlab-none"]:
        return [None, "alert no_application_protocol"]
    if "h2" in offer and h2:
        return ["h2"]
    return ["http/1.1"] if "http/1.1" in offer else [None, "alert no_application_protocol"]


def tls_resumption(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Recorded, not required: whether a TLS 1.3 ticket and a TLS 1.2 session resume."""
    for version in ("1.3", "1.2"):
        context = tls_client(ctx, version)
        session = _first_session(ctx, context)
        with handshake(ctx, context, session=session) as sock:
            resumed = sock.session_reused
        outcome.observed.append(f"TLS {version} {'resumed' if resumed else 'not resumed'}")


def _first_session(ctx: VerifyContext, context: ssl.SSLContext) -> ssl.SSLSession:
    """A session after one request: TLS 1.3 tickets come after the handshake."""
    with handshake(ctx, context) as sock:
        sock.sendall(f"GET {ctx.probe_target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        sock.recv(65536)
        return sock.session


def tls_plaintext(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Plain HTTP on the TLS port: never served; an alert or a plain 400, then a close."""
    with socket.create_connection(("127.0.0.1", ctx.tls_port), timeout=ctx.timeout_s) as sock:
        sock.sendall(f"GET {ctx.probe_target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        received, closed = read_plain(sock, CLOSE_WITHIN_S + ctx.give_up_s)
    what = describe_plain(received)
    outcome.observed.append(f"{what}, {'closed' if closed else 'kept open'}")
    if what.startswith("HTTP ") and what != "HTTP 400":
        outcome.fail(f"a plaintext request on the TLS port was answered {what}")
    elif what.startswith("other"):
        outcome.fail(f"a plaintext request on the TLS port got {what}")
    if not closed:
        outcome.fail("the server did not close the connection after plaintext on the TLS port")


def describe_plain(received: bytes) -> str:
    if not received:
        return "nothing"
    if received[:1] == bytes([tlswire.ALERT]) and len(received) >= 7:
        return f"alert {tlswire.ALERT_NAMES.get(received[6], received[6])}"
    if received.startswith(b"HTTP/1."):
        return f"HTTP {received.split(b' ', 2)[1].decode('latin-1')}"
    return f"other {received[:16]!r}"


def read_plain(sock: socket.socket, timeout_s: float) -> tuple[bytes, bool]:
    """What arrives in `timeout_s`, and whether the server closed or reset the connection."""
    received, end = receive_all(sock, time.monotonic() + timeout_s)
    return received, end in (End.CLOSED, End.RESET)


def tls_truncated_hello(ctx: VerifyContext, params: dict, outcome: Outcome) -> None:
    """Half a ClientHello: others are served meanwhile, and the client's FIN ends it."""

    def serve_other() -> bool:
        with handshake(ctx, tls_client(ctx)) as other:
            other.sendall(f"GET {ctx.probe_target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            return other.recv(65536).startswith(b"HTTP/1.1 ")

    truncated_hello(ctx, ctx.tls_port, serve_other, outcome)


def truncated_hello(ctx: VerifyContext, port: int, serve_other, outcome: Outcome) -> None:
    """Half a ClientHello to `port`; while it hangs, `serve_other()` must say another TLS
    client was served; after the client's FIN the server must close (spec §12, §15)."""
    hello = tlswire.client_hello("1.2", tlswire.AEAD_SUITES)
    with socket.create_connection(("127.0.0.1", port), timeout=ctx.timeout_s) as sock:
        sock.sendall(hello[: len(hello) // 2])
        try:
            served = serve_other()
        except OSError as error:
            served = False
            outcome.observed.append(f"other connection: {error}")
        outcome.require(served, "another TLS client was not served while a ClientHello hung")
        sock.shutdown(socket.SHUT_WR)
        received, closed = read_plain(sock, CLOSE_WITHIN_S + ctx.give_up_s)
    outcome.observed.append(f"{describe_plain(received)}, {'closed' if closed else 'open'}")
    outcome.require(closed, "the server kept the connection of a truncated ClientHello open")


CHECKS = {
    "tls_handshake": tls_handshake,
    "tls_refused": tls_refused,
    "tls_close_notify": tls_close_notify,
    "tls_alpn": tls_alpn,
    "tls_resumption": tls_resumption,
    "tls_plaintext": tls_plaintext,
    "tls_truncated_hello": tls_truncated_hello,
}
