"""start.sh's HOST: rsyslogd takes TCP and UDP syslog on 127.0.0.1 and on HOST (127.0.0.2
stands in for a lab host's address), and refuses a HOST that is not an address."""

import socket
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECOND = "127.0.0.2"


def free_port() -> int:
    """A port free for TCP and UDP alike."""
    while True:
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def connect(address: str, port: int, give_up_s: float = 10.0) -> socket.socket:
    """A TCP connection, retried while rsyslogd is starting."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            return socket.create_connection((address, port), timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def wait_for_count(work: str, wanted: int, give_up_s: float = 10.0) -> bool:
    """True once count.sh (the manifest's syslog_count) says `wanted`."""
    deadline = time.monotonic() + give_up_s
    while time.monotonic() < deadline:
        count = subprocess.run(
            [HERE / "count.sh", work], capture_output=True, text=True, check=True
        )
        if count.stdout.strip() == str(wanted):
            return True
    return False


class HostTest(unittest.TestCase):
    def start(self, work: Path, port: int, host: str) -> subprocess.Popen:
        command = [HERE / "start.sh", str(port), work, "100", host]
        return subprocess.Popen(command, stderr=subprocess.PIPE, text=True)

    def test_counts_messages_on_both_addresses(self):
        port = free_port()
        with tempfile.TemporaryDirectory() as work:
            rsyslogd = self.start(Path(work), port, SECOND)
            try:
                for address in ("127.0.0.1", SECOND):
                    with connect(address, port) as tcp:
                        tcp.sendall(f"<14>1 - host app - - - tcp to {address}\n".encode())
                # Counted TCP messages mean every input is up: UDP sent earlier could be lost.
                self.assertTrue(wait_for_count(work, 2))
                for address in ("127.0.0.1", SECOND):
                    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                        udp.sendto(
                            f"<14>1 - host app - - - udp to {address}\n".encode(), (address, port)
                        )
                self.assertTrue(wait_for_count(work, 4))
            finally:
                rsyslogd.terminate()
                rsyslogd.wait(10)

    def test_host_that_is_no_address_is_refused(self):
        with tempfile.TemporaryDirectory() as work:
            rsyslogd = self.start(Path(work), free_port(), 'x" port="514')
            _, errors = rsyslogd.communicate(timeout=10)
            self.assertEqual(rsyslogd.returncode, 2)
            self.assertIn("is not an IP address", errors)


if __name__ == "__main__":
    unittest.main()
