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
# p95 differences) and the ratio, then the median of each phase of the cycle (network:
# the network and its host rules; provision; exec; teardown: the sandbox, then the rules
# and the network), so the difference can be traced to a phase. A figure to read, never
# an assertion: the target is that the network costs no more than 50 ms a run.
# Usage: scripts/bench-network.sh [N]   (default 20; IMAGE=… to change the image, default
# boitata-base:bookworm, built by scripts/build-base-image.sh). Needs root (host rules).
set -euo pipefail

NAME=bench-network
source "$(dirname "${BASH_SOURCE[0]}")/bench-sandbox-common.sh"
PHASES="$(mktemp)"
trap 'rm -f "$OUT" "$PHASES" "$PHASES.err"' EXIT
export BENCH_PHASES=1

# One cycle of MODE, its time as "NAME MS" in $OUT and its phases (the measured cycle's,
# the last line; the first is the warm-up's) as "NAME PHASE MS…" in $PHASES.
cycle() { # NAME MODE
  "$BENCH" --cycles 1 --image "$IMAGE" --network "$2" 2>"$PHASES.err" | sed "s/^boitata /$1 /" >>"$OUT" ||
    { cat "$PHASES.err" >&2; exit 1; }
  printf '%s %s\n' "$1" "$(grep '^phases:' "$PHASES.err" | tail -n 1)" >>"$PHASES"
}

say "$N cycles each, interleaved (each after a warm-up cycle in its process)"
for ((i = 1; i <= N; i++)); do
  cycle run-network run
  cycle bridge run-bridge
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

phase() { # NAME PHASE -> the median of PHASE's milliseconds for NAME
  grep "^$1 phases:" "$PHASES" | sed -n "s/.* $2 \([0-9.]*\) ms.*/\1/p" | sort -n | awk '
    { v[NR] = $1 }
    END { if (NR == 0) { print "nan"; exit } printf "%.1f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf '\n%-52s %10s %10s %10s\n' "phase medians (ms)" "run net" "bridge" "added"
for p in network provision exec teardown; do
  r="$(phase run-network "$p")"; b="$(phase bridge "$p")"
  printf '%-52s %10s %10s %10s\n' "$p" "$r" "$b" "$(awk -v a="$r" -v b="$b" 'BEGIN { printf "%.1f", a - b }')"
done
