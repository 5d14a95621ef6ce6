#!/usr/bin/env bash
# Model request latency through the model gateway vs straight to the same fake model
# server (both on loopback): REQUESTS streamed Chat Completions requests each (default
# 1000), interleaved, each answer read to its end. Prints p50 and p95 of both, what the
# gateway adds, and the ratio. A benchmark, not a test: nothing here asserts a time.
#
#   scripts/bench-gateway.sh                    # release build, 1000 requests
#   REQUESTS=200 PROFILE=dev scripts/bench-gateway.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

REQUESTS="${REQUESTS:-1000}"
PROFILE="${PROFILE:-release}"

echo "== building ($PROFILE)" >&2
cargo build -q --profile "$PROFILE" -p boitata-orchestrator --example bench_gateway
dir="$PROFILE"
[ "$PROFILE" = dev ] && dir=debug
"${CARGO_TARGET_DIR:-target}/$dir/examples/bench_gateway" --requests "$REQUESTS"
