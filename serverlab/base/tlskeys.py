"""Throwaway TLS key material for one run: a CA and a server certificate signed by it.

A server that claims a TLS part (spec §12) is handed a certificate and key through the
`{tls_cert}` and `{tls_key}` placeholders. They are made afresh in the run's own work
folder (serverlab.base.scratch), readable by this user only, and go with that folder; no
key is ever committed. Clients of the run (verify, the engine) trust only the run's CA.
The CA certificate (public) travels as PEM text to generators on other hosts
(`certificate_pem`); a private key never leaves the run's host.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# ECDSA P-256 is the default: its signature costs ~13 µs against RSA-2048's ~0.3 ms, so
# the handshake figure of a run says which key type it used (issue 22).
KEY_TYPES = ("ecdsa-p256", "rsa-2048")
DEFAULT_KEY_TYPE = "ecdsa-p256"
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1",)
# Long enough for any run, short enough that a leaked file is soon worthless.
VALID_FOR = datetime.timedelta(days=2)
PEM_LABEL = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")


class KeyTypeError(ValueError):
    pass


class CaPemError(ValueError):
    pass


@dataclass(frozen=True)
class KeyMaterial:
    folder: Path
    key_type: str
    ca_cert: Path  # PEM: what a client trusts
    cert: Path  # PEM: the server's certificate followed by nothing else (the CA is separate)
    key: Path  # PEM, PKCS#8, unencrypted: the server's private key

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.ca_cert, self.cert, self.key)


def make_key_material(
    folder: Path, key_type: str = DEFAULT_KEY_TYPE, addresses: Iterable[str] = ()
) -> KeyMaterial:
    """A fresh CA and a server certificate for 127.0.0.1, localhost and `addresses` (the
    lab or cluster address the server also listens on, which remote generators connect to),
    written to `folder` (made with mode 0700), each file mode 0600."""
    if key_type not in KEY_TYPES:
        raise KeyTypeError(f"unknown TLS key type '{key_type}' (known: {', '.join(KEY_TYPES)})")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key, server_key = _new_key(key_type), _new_key(key_type)
    ca_cert = _ca_certificate(ca_key)
    named = dict.fromkeys([*SERVER_ADDRESSES, *addresses])  # in order, each once
    server_cert = _server_certificate(server_key, ca_key, ca_cert, list(named))
    material = KeyMaterial(
        folder, key_type, folder / "ca.pem", folder / "server.pem", folder / "server.key"
    )
    _write_private(material.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(material.cert, server_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(
        material.key,
        server_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    return material


def _new_key(key_type: str):
    if key_type == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def _ca_certificate(ca_key) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "serverlab throwaway run CA")])
    return (
        _builder(name, name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )


def _server_certificate(
    server_key, ca_key, ca_cert: x509.Certificate, addresses: list[str]
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAMES[0])])
    names = [x509.DNSName(name) for name in SERVER_NAMES]
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in addresses]
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    return (
        _builder(subject, ca_cert.subject, server_key.public_key())
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), False
        )
        .sign(ca_key, hashes.SHA256())
    )


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # A minute back: a client whose clock is a little behind still accepts it.
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + VALID_FOR)
    )


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        # RSA key exchange is not offered (AEAD with forward secrecy only, spec §12).
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _write_private(path: Path, data: bytes) -> None:
    """Writes a file that only this user can read, never briefly readable by others."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def certificate_pem(text: str, source: str) -> str:
    """`text`, when it is PEM certificates and nothing else: what may travel to another
    host with a plan. CaPemError naming `source` if not (a private key above all)."""
    labels = sorted(set(PEM_LABEL.findall(text)))
    if any("PRIVATE KEY" in label for label in labels):
        raise CaPemError(f"{source} holds a private key: only a CA certificate may be sent")
    if labels != ["CERTIFICATE"]:
        found = ", ".join(labels) or "no PEM block"
        raise CaPemError(f"{source} must hold PEM certificates only, not {found}")
    try:
        x509.load_pem_x509_certificates(text.encode())
    except ValueError as err:
        raise CaPemError(f"{source} holds a certificate that does not parse: {err}") from None
    return text


def read_ca_pem(path: str | Path) -> str:
    """The PEM text of a CA file, checked by `certificate_pem`; CaPemError if unreadable."""
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as err:
        why = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise CaPemError(f"cannot read the CA file {path}: {why}") from None
    return certificate_pem(text, f"the CA file {path}")
