#!/usr/bin/env bash
# Benchmark a sandbox cycle (make a sandbox, run `true` in it, remove it) three ways,
# in the same run, N times each, interleaved so that drift affects all alike:
#
#   boitata     provision -> exec `true` -> destroy through Boitata's Docker backend
#               (the bench_sandbox example; each measured cycle follows a warm-up
#               cycle that connects, as later sandboxes of a run do; measured both
#               interleaved with the others and N back to back in one process)
#   run-rm      docker run --rm IMAGE true
#   create-exec docker create + docker start + docker exec true + docker rm -f
#
# Prints the median and p95 of each, in milliseconds, and the ratios of Boitata's to
# the others. Usage: scripts/bench-sandbox.sh [N]   (default 20; IMAGE=… to change
# the image, default boitata-base:bookworm, built by scripts/build-base-image.sh).
set -euo pipefail

NAME=bench-sandbox
source "$(dirname "${BASH_SOURCE[0]}")/bench-sandbox-common.sh"
trap 'rm -f "$OUT"; docker ps -aq --filter label=boitata.run_id=bench-cli | xargs -r docker rm -f >/dev/null' EXIT

now_ns() { date +%s%N; }
time_ms() { # run "$@" and print its wall time in ms
  local t0 t1
  t0=$(now_ns); "$@" >/dev/null; t1=$(now_ns)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e6 }'
}
create_exec_rm() {
  local id
  id=$(docker create --label boitata.run_id=bench-cli "$IMAGE" sleep infinity)
  docker start "$id" >/dev/null
  docker exec "$id" true
  docker rm -f "$id" >/dev/null
}

say "warming up"
docker run --rm "$IMAGE" true
create_exec_rm

say "$N cycles each, interleaved"
for ((i = 1; i <= N; i++)); do
  "$BENCH" --cycles 1 --image "$IMAGE" >>"$OUT"
  echo "run-rm $(time_ms docker run --rm "$IMAGE" true)" >>"$OUT"
  echo "create-exec $(time_ms create_exec_rm)" >>"$OUT"
done
# Boitata in one process, N cycles back to back (the connection is reused, as in a run).
"$BENCH" --cycles "$N" --image "$IMAGE" | sed 's/^boitata /boitata-batch /' >>"$OUT"


printf '\n%-44s %10s %10s\n' "cycle (N=$N, image $IMAGE)" "median ms" "p95 ms"
for name in boitata boitata-batch run-rm create-exec; do
  read -r med p95 < <(stats "$name")
  case "$name" in
    boitata) label="boitata cycle (interleaved, warm connection)";;
    boitata-batch) label="boitata cycle (N back to back, one process)";;
    run-rm) label="docker run --rm IMAGE true";;
    create-exec) label="docker create+start+exec+rm";;
  esac
  printf '%-44s %10s %10s\n' "$label" "$med" "$p95"
  eval "MED_${name//-/_}=$med; P95_${name//-/_}=$p95"
done
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '\nratios (boitata back to back / other): median %s vs run --rm, %s vs create+exec; p95 %s vs run --rm, %s vs create+exec\n' \
  "$(ratio "$MED_boitata_batch" "$MED_run_rm")" "$(ratio "$MED_boitata_batch" "$MED_create_exec")" \
  "$(ratio "$P95_boitata_batch" "$P95_run_rm")" "$(ratio "$P95_boitata_batch" "$P95_create_exec")"
printf 'ratios (boitata interleaved / other): median %s vs run --rm, %s vs create+exec\n' \
  "$(ratio "$MED_boitata" "$MED_run_rm")" "$(ratio "$MED_boitata" "$MED_create_exec")"
