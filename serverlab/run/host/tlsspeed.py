"""Host stage: the physical limit beside a TLS run's handshake figures. `openssl speed`,
pinned to the server's CPU, says how many signatures (ECDSA P-256, RSA-2048) and X25519 key
exchanges one core of this machine makes per second; a full TLS handshake costs the server
one signature and one key exchange, so together they bound one core's full handshakes per
second. Measured once per run, and only for runs with TLS tests (issue 22)."""

from __future__ import annotations

import shutil
import subprocess

# `openssl speed` names -> what the run's metadata calls them.
ALGORITHMS = {"ecdsap256": "ecdsa-p256", "rsa2048": "rsa-2048", "ecdhx25519": "x25519"}
# Each algorithm's operations run this long: short, as the figure is a ceiling, not a study.
SECONDS = 1
# The whole measurement (each algorithm signs and verifies, or derives) is bounded.
TIMEOUT_S = 60.0
SOURCE = "openssl speed -seconds 1 -mr, pinned with taskset to the server's first CPU"


def measure(server_cpus: str | None) -> dict:
    """Sign/s per key type, X25519 ops/s, and the full-handshake ceiling of one core for each
    key type (one signature plus one X25519 derivation per handshake); `error` if not run."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return {"error": "no openssl on PATH", "source": SOURCE}
    cpu = (server_cpus or "0").split(",")[0].split("-")[0]
    argv = ["taskset", "-c", cpu, openssl, "speed", "-seconds", str(SECONDS), "-mr"]
    try:
        done = subprocess.run(
            [*argv, *ALGORITHMS], capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": f"openssl speed did not run: {error}", "source": SOURCE}
    rates = parse(done.stdout)
    if len(rates) < len(ALGORITHMS):
        return {
            "error": f"openssl speed said too little: {done.stderr.strip()[:200]}",
            "source": SOURCE,
        }
    return {**limits(rates), "cpu": cpu, "version": _version(openssl), "source": SOURCE}


def parse(text: str) -> dict[str, float]:
    """The `-mr` result lines: F2 (RSA), F4 (ECDSA) give sign/s first, F5 (ECDH) ops/s."""
    rates = {}
    for line in text.splitlines():
        fields = line.strip().lstrip("+").split(":")
        if len(fields) < 4:
            continue
        kind, bits, per_s = fields[0], fields[2], fields[3]
        name = {("F2", "2048"): "rsa-2048", ("F4", "256"): "ecdsa-p256"}.get((kind, bits))
        if kind == "F5" and bits == "253":
            name = "x25519"
        if name:
            rates[name] = float(per_s)
    return rates


def limits(rates: dict[str, float]) -> dict:
    """The measured rates and, per key type, 1 / (1/sign + 1/x25519): the full handshakes
    one core could make if it did nothing else."""
    kx = rates["x25519"]
    ceiling = {key: round(1 / (1 / rates[key] + 1 / kx), 1) for key in ("ecdsa-p256", "rsa-2048")}
    return {
        "sign_per_s": {key: rates[key] for key in ("ecdsa-p256", "rsa-2048")},
        "x25519_per_s": kx,
        "handshakes_per_s_per_core": ceiling,
    }


def _version(openssl: str) -> str:
    done = subprocess.run([openssl, "version"], capture_output=True, text=True, timeout=10)
    return done.stdout.strip()
