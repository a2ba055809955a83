"""The document root verify serves from: known files, plus a secret outside it.

The secret lets the traversal cases prove that no byte outside the root leaks out.
"""

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

LARGE_FILE_BYTES = 1024 * 1024 + 123  # bigger than any one read buffer, not a round number


@dataclass(frozen=True)
class Docroot:
    root: Path
    secret_path: Path
    secret: bytes

    def file_bytes(self, relative: str) -> bytes:
        return (self.root / relative).read_bytes()

    def sha256(self, relative: str) -> str:
        return hashlib.sha256(self.file_bytes(relative)).hexdigest()


def make_docroot(base: Path) -> Docroot:
    """Fills `base/docroot` with the verify files; the secret lives at `base/secret.txt`."""
    root = base / "docroot"
    (root / "sub" / "dir").mkdir(parents=True)
    secret = b"SERVERLAB-SECRET-" + secrets.token_hex(16).encode() + b"\n"
    secret_path = base / "secret.txt"
    secret_path.write_bytes(secret)
    (root / "hello.txt").write_bytes(b"hello from the serverlab docroot\n")
    (root / "with space.txt").write_bytes(b"a file whose name has a space\n")
    (root / "sub" / "dir" / "bytes.bin").write_bytes(bytes(range(256)) * 16)
    (root / "large.bin").write_bytes(_pattern(LARGE_FILE_BYTES))
    (root / "empty.txt").write_bytes(b"")
    os.symlink(secret_path, root / "link-to-secret")
    return Docroot(root=root, secret_path=secret_path, secret=secret)


def _pattern(size: int) -> bytes:
    """Deterministic, non-repeating-looking bytes (a hash chain), so offsets cannot be faked."""
    blocks, block = [], b"serverlab"
    for _ in range(size // 32 + 1):
        block = hashlib.sha256(block).digest()
        blocks.append(block)
    return b"".join(blocks)[:size]
