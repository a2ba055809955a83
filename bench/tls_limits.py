#!/usr/bin/env python3
"""Full TLS handshakes per core beside the limit one core's crypto allows (tls-vs-peers.sh).

`tls_limits.py WORK CPU` reads `openssl speed`'s output (WORK/speed.out: ECDSA P-256 sign and
verify, X25519 derive, measured on CPU) and the per-round results of the new-connection runs
(WORK/NAME.results, "rps cpu_us_per_request requests errors p50", CPU from wait4()'s rusage;
WORK/NAME.busy, the nginx worker's share of its core from /proc/PID/stat), and prints:

- the client-side limit of a full TLS 1.3 handshake with an ECDSA P-256 certificate and X25519,
  1 / (2/x25519 + n/verify): an X25519 key generation (counted as one derive: OpenSSL's speed
  has no keygen figure, and a fixed-base keygen costs at most that) and a derive, plus n ECDSA
  verifies: n = 2 when the certificate chain is checked (the CA's signature on the server's
  certificate and the CertificateVerify), n = 1 when only the CertificateVerify is (the
  engine's --insecure, and OpenSSL clients such as ab that trust no CA: their chain check stops
  at the missing issuer before any signature);
- each client's CPU per new connection, the handshakes per second per core that makes, and the
  fraction of the limit; also without its cleartext new connection's CPU, which leaves TLS's own
  share (medians over the rounds);
- the server side's limit, 1 / (1/sign + 2/x25519), beside what nginx served and how busy it was.
"""

import os
import re
import statistics
import sys

# name of the TLS run, its cleartext twin, label, verifies the client makes per handshake
CLIENTS = (
    ("sl_hs", "sl_nc", "serverlab-load --tls-ca", 2),
    ("sl_hs_any", "sl_nc", "serverlab-load --insecure", 1),
    ("ab_hs", "ab_nc", "ab", 1),
)


def speed(path: str) -> dict[str, float]:
    """Operations per second from `openssl speed`'s human table."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ecdsa = re.search(r"ecdsa \(nistp256\)\s+\S+s\s+\S+s\s+([\d.]+)\s+([\d.]+)", text)
    ecdh = re.search(r"ecdh \(X25519\)\s+\S+s\s+([\d.]+)", text)
    if not ecdsa or not ecdh:
        raise SystemExit(f"tls_limits: cannot read openssl speed's output in {path}")
    return {"sign": float(ecdsa[1]), "verify": float(ecdsa[2]), "x25519": float(ecdh[1])}


def median_column(work: str, name: str, suffix: str, column: int) -> float | None:
    """The median over the rounds of one column of WORK/NAME.SUFFIX, None if it has no rows."""
    path = os.path.join(work, name + suffix)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        rows = [line.split() for line in f if line.strip()]
    return statistics.median(float(r[column]) for r in rows) if rows else None


def client_lines(work: str, ops: dict[str, float]) -> list[str]:
    """One line per client: CPU per connection, handshakes per core and the fraction reached."""
    lines = []
    for name, plain, label, verifies in CLIENTS:
        limit = 1 / (2 / ops["x25519"] + verifies / ops["verify"])
        tls_us = median_column(work, name, ".results", 1)
        plain_us = median_column(work, plain, ".results", 1)
        if tls_us is None or plain_us is None:
            lines.append(f"    {label}: no result")
            continue
        whole = 1e6 / tls_us
        line = (
            f"    {label}: {tls_us:.1f} us CPU per new connection = {whole:,.0f} handshakes/s"
            f" per core, {whole / limit:.2f} of the {verifies}-verify limit {limit:,.0f}/s"
        )
        if tls_us > plain_us:
            own = 1e6 / (tls_us - plain_us)
            line += (
                f"; less its cleartext connection ({plain_us:.1f} us): TLS's own"
                f" {tls_us - plain_us:.1f} us = {own:,.0f}/s, {own / limit:.2f} of it"
            )
        lines.append(line)
    return lines


def server_line(work: str, ops: dict[str, float]) -> str:
    """nginx's crypto limit on one core, beside its rate and busy share in the engine's runs."""
    limit = 1 / (1 / ops["sign"] + 2 / ops["x25519"])
    rate = median_column(work, "sl_hs", ".results", 0)
    busy = median_column(work, "sl_hs", ".busy", 0)
    seen = ""
    if rate and busy:
        seen = (
            f"; with serverlab-load --tls-ca it served {rate:,.0f} handshakes/s at"
            f" {100 * busy:.0f}% of its core ({rate / busy:,.0f}/s per busy core)"
        )
    return (
        f"    server side (ECDSA sign, X25519 keygen + derive): limit {limit:,.0f}/s per core{seen}"
    )


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: tls_limits.py WORK CPU", file=sys.stderr)
        return 2
    work, cpu = sys.argv[1], sys.argv[2]
    ops = speed(os.path.join(work, "speed.out"))
    print(
        f"    openssl speed on CPU {cpu}: X25519 derive {ops['x25519']:,.0f}/s,"
        f" ECDSA P-256 sign {ops['sign']:,.0f}/s, verify {ops['verify']:,.0f}/s"
    )
    print(
        "    client limit = 1 / (2/x25519 + n/verify) handshakes/s per core (keygen counted as"
        " a derive; n = 2 with the chain checked, 1 with CertificateVerify only)"
    )
    for line in client_lines(work, ops):
        print(line)
    print(server_line(work, ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
