#!/usr/bin/env bash
# Live paired runs (serverlab compare --paired): A, B, A' interleaved in one sitting, the
# delta of B with its interval beside the A/A floor (A against A'), and the gate's exit code.
#   1. A/A on keep-alive GET /perf (node-http): the noise floor of throughput and p99 on this
#      machine, with the gate at PCT (expected: 0, or 3 when the machine is too noisy or a
#      test is flagged; never 1).
#   2. The planted regression: rust-zhtta's chunked reads of 512,000 bytes (A) against 1 KB
#      (B) on /files (expected: 1).
# Usage: bench/history-paired.sh   (ROUNDS=6 PCT=10 by default; results in a temporary DB)
# Needs: make build (node-http, rust-zhtta and the engine).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
ROUNDS="${ROUNDS:-6}"
PCT="${PCT:-10}"
SERVERLAB="${SERVERLAB:-$ROOT/.venv/bin/serverlab}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$SERVERLAB" compare --paired "$HERE/history-keepalive.toml" - - --rounds "$ROUNDS" \
  --metric rps --metric p99 --db "$WORK/lab.db" --fail-on-regression "$PCT"
echo "A/A keep-alive: gate exit code $? (0 pass, 3 inconclusive, 1 regression)"

"$SERVERLAB" compare --paired "$HERE/history-files.toml" chunk_size=512000 chunk_size=1024 \
  --rounds "$ROUNDS" --metric rps --metric p99 --db "$WORK/lab.db" --fail-on-regression "$PCT"
echo "planted regression: gate exit code $? (expected 1)"
