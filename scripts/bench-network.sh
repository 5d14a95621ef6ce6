#!/usr/bin/env bash
# Benchmark what a run's own network costs: a whole run's sandbox cycle through
# Boitata's RunSandboxes (provision -> exec `true` -> teardown), N times each way,
# interleaved so that drift affects both alike:
#
#   run-network  each cycle is a new run on its own network: it creates the network and
#                its host rules, provisions, execs, then removes the sandbox, the rules
#                and the network (the default for every run now)
#   bridge       the same cycle on Docker's shared bridge (network: bridge, not isolated)
#
# Prints the median and p95 of each in milliseconds, what the network adds (median and
# p95 differences) and the ratio. A figure to read, never an assertion: the target is
# that the network costs no more than 50 ms a run.
# Usage: scripts/bench-network.sh [N]   (default 20; IMAGE=… to change the image, default
# boitata-base:bookworm, built by scripts/build-base-image.sh). Needs root (host rules).
set -euo pipefail

NAME=bench-network
source "$(dirname "${BASH_SOURCE[0]}")/bench-sandbox-common.sh"
trap 'rm -f "$OUT"' EXIT

say "$N cycles each, interleaved (each after a warm-up cycle in its process)"
for ((i = 1; i <= N; i++)); do
  "$BENCH" --cycles 1 --image "$IMAGE" --network run | sed 's/^boitata /run-network /' >>"$OUT"
  "$BENCH" --cycles 1 --image "$IMAGE" --network run-bridge | sed 's/^boitata /bridge /' >>"$OUT"
done

printf '\n%-52s %10s %10s\n' "run cycle (N=$N, image $IMAGE)" "median ms" "p95 ms"
read -r MED_RUN P95_RUN < <(stats run-network)
read -r MED_BRIDGE P95_BRIDGE < <(stats bridge)
printf '%-52s %10s %10s\n' "on the run's own network (network + host rules)" "$MED_RUN" "$P95_RUN"
printf '%-52s %10s %10s\n' "on Docker's bridge (not isolated)" "$MED_BRIDGE" "$P95_BRIDGE"
calc() { awk "BEGIN { printf \"%.1f\", $1 }"; }
printf '\nthe run network adds %s ms at the median (p95: %s ms); ratio %s (median), %s (p95); target: <= 50 ms\n' \
  "$(calc "$MED_RUN - $MED_BRIDGE")" "$(calc "$P95_RUN - $P95_BRIDGE")" \
  "$(awk -v a="$MED_RUN" -v b="$MED_BRIDGE" 'BEGIN { printf "%.2f", a / b }')" \
  "$(awk -v a="$P95_RUN" -v b="$P95_BRIDGE" 'BEGIN { printf "%.2f", a / b }')"
