"""start.sh's HOST and TLS: nginx listens on 127.0.0.1 and on HOST (127.0.0.2 stands in
for a lab host's address) on all three ports (HTTP/1.1, TLS, h2c), refuses a HOST that is
not an address before writing any config, and takes an RSA key as well as an ECDSA one."""

import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECOND = "127.0.0.2"
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
H2_SETTINGS = 0x4


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def retried(attempt, give_up_s: float = 10.0):
    """attempt()'s value, retried on OSError while nginx is starting."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            return attempt()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def get(address: str, port: int, path: str, context: ssl.SSLContext | None = None) -> int:
    """The status of GET path, over HTTPS when a TLS context is given."""
    scheme = "https" if context else "http"

    def attempt() -> int:
        url = f"{scheme}://{address}:{port}{path}"
        with urllib.request.urlopen(url, timeout=2, context=context) as response:
            return response.status

    return retried(attempt)


def h2c_first_frame_type(address: str, port: int) -> int:
    """The type of the first frame the h2c port sends after a client preface."""

    def attempt() -> int:
        with socket.create_connection((address, port), timeout=2) as sock:
            sock.sendall(H2_PREFACE + H2_EMPTY_SETTINGS)
            header = b""
            while len(header) < 9:
                chunk = sock.recv(9 - len(header))
                if not chunk:
                    raise ConnectionError("closed before a frame")
                header += chunk
            return header[3]

    return retried(attempt)


# openssl req's key options for the two key types the lab makes (serverlab.base.tlskeys).
KEY_OPTIONS = {
    "ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "rsa": ["-newkey", "rsa:2048"],
}


def make_certificate(folder: Path, key_type: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and 127.0.0.2, made by the openssl tool."""
    cert, key = folder / "server.pem", folder / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", *KEY_OPTIONS[key_type], "-nodes", "-days", "1",
         "-subj", "/CN=serverlab-test", "-addext", f"subjectAltName=IP:127.0.0.1,IP:{SECOND}",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def client_context(cert: Path, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A client that trusts only the test's certificate, of one TLS version if given."""
    context = ssl.create_default_context(cafile=cert)
    if version:
        context.minimum_version = context.maximum_version = version
    return context


class HostTest(unittest.TestCase):
    def start(
        self, work: Path, host: str, key_type: str = "ecdsa", header_timeout_s: int = 60
    ) -> subprocess.Popen:
        """nginx from start.sh; its ports go in self.ports, its certificate in self.cert."""
        (work / "docroot").mkdir(exist_ok=True)
        self.ports = {"http": free_port(), "tls": free_port(), "h2c": free_port()}
        self.cert, key = make_certificate(work, key_type)
        command = [HERE / "start.sh", self.ports["http"], work / "docroot", work / "run", 1, 64,
                   host, self.ports["tls"], self.cert, key, self.ports["h2c"],
                   header_timeout_s, 128]  # fmt: skip
        return subprocess.Popen([str(part) for part in command], stderr=subprocess.PIPE, text=True)

    def stop(self, nginx: subprocess.Popen) -> None:
        nginx.terminate()
        nginx.communicate(timeout=10)

    def test_answers_on_both_addresses_on_every_port(self):
        with tempfile.TemporaryDirectory() as work:
            nginx = self.start(Path(work), SECOND)
            try:
                for address in ("127.0.0.1", SECOND):
                    with self.subTest(address=address):
                        self.assertEqual(get(address, self.ports["http"], "/perf"), 200)
                        tls = client_context(self.cert)
                        self.assertEqual(get(address, self.ports["tls"], "/perf", tls), 200)
                        frame = h2c_first_frame_type(address, self.ports["h2c"])
                        self.assertEqual(frame, H2_SETTINGS)
            finally:
                self.stop(nginx)

    def test_an_rsa_key_gets_an_aead_suite_in_tls_12(self):
        with tempfile.TemporaryDirectory() as work:
            nginx = self.start(Path(work), "127.0.0.1", key_type="rsa")
            try:
                context = client_context(self.cert, ssl.TLSVersion.TLSv1_2)
                address = ("127.0.0.1", self.ports["tls"])
                raw = retried(lambda: socket.create_connection(address, timeout=2))
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                    self.assertRegex(sock.cipher()[0], r"^ECDHE-RSA-(AES\d+-GCM|CHACHA20)")
            finally:
                self.stop(nginx)

    def test_a_connection_that_sends_no_header_is_closed_at_the_header_timeout(self):
        """The header_timeout_s tunable is nginx's client_header_timeout: a connection
        opened and left (the abuse suite's idle attack) is closed after it."""
        with tempfile.TemporaryDirectory() as work:
            nginx = self.start(Path(work), "127.0.0.1", header_timeout_s=1)
            try:
                address = ("127.0.0.1", self.ports["http"])
                sock = retried(lambda: socket.create_connection(address, timeout=30))
                with sock:
                    sock.sendall(b"GET /perf HTTP/1.1\r\n")  # and never the rest
                    self.assertEqual(sock.recv(1024), b"")  # closed, no answer
            finally:
                self.stop(nginx)

    def test_host_that_is_no_address_is_refused(self):
        with tempfile.TemporaryDirectory() as work:
            nginx = self.start(Path(work), "127.0.0.1; include /etc/passwd")
            _, errors = nginx.communicate(timeout=10)
            self.assertEqual(nginx.returncode, 2)
            self.assertIn("is not an IP address", errors)
            self.assertFalse((Path(work) / "run" / "nginx.conf").exists())


if __name__ == "__main__":
    unittest.main()
