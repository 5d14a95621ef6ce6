#!/usr/bin/env bash
# The agent loop's own overhead per tool call, next to the raw cost of the same reads.
# BENCH_CALLS=N (default 1000) sets the number of file_read calls.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo bench --quiet -p boitata-core --bench agent_loop
