"""start.sh's HOST: nginx listens on 127.0.0.1 and on HOST (127.0.0.2 stands in for a lab
host's address), and refuses a HOST that is not an address before writing any config."""

import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECOND = "127.0.0.2"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(address: str, port: int, path: str, give_up_s: float = 10.0) -> int:
    """The status of GET path, retried while nginx is starting."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            with urllib.request.urlopen(f"http://{address}:{port}{path}", timeout=2) as response:
                return response.status
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class HostTest(unittest.TestCase):
    def start(self, work: Path, port: int, host: str) -> subprocess.Popen:
        (work / "docroot").mkdir(exist_ok=True)
        command = [HERE / "start.sh", str(port), work / "docroot", work / "run", "1", "64", host]
        return subprocess.Popen(command, stderr=subprocess.PIPE, text=True)

    def test_answers_on_both_addresses(self):
        port = free_port()
        with tempfile.TemporaryDirectory() as work:
            nginx = self.start(Path(work), port, SECOND)
            try:
                self.assertEqual(get("127.0.0.1", port, "/perf"), 200)
                self.assertEqual(get(SECOND, port, "/perf"), 200)
            finally:
                nginx.terminate()
                nginx.wait(10)

    def test_host_that_is_no_address_is_refused(self):
        with tempfile.TemporaryDirectory() as work:
            nginx = self.start(Path(work), free_port(), "127.0.0.1; include /etc/passwd")
            _, errors = nginx.communicate(timeout=10)
            self.assertEqual(nginx.returncode, 2)
            self.assertIn("is not an IP address", errors)
            self.assertFalse((Path(work) / "run" / "nginx.conf").exists())


if __name__ == "__main__":
    unittest.main()
