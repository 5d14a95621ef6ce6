#!/usr/bin/env bash
# Benchmarks boitata-server on this machine (loopback only):
#
#   1. SSE fan-out, live: 200 subscribers follow one run while it emits ~10,000 events
#      (a host exec node printing 10,000 lines, one at a time);
#   2. SSE fan-out, replay: 200 subscribers read the same finished run from its start;
#   3. `wrk` against GET /api/runs (with the bearer token, as a real client sends it).
#
# Prints requests/s and p99 latency (wrk), events/s delivered (both SSE phases) and the
# server's peak resident memory (VmHWM). Needs: cargo, python3, wrk (Debian: apt-get
# install wrk; installed here when missing and running as root).
#
#   scripts/bench-server.sh                     # defaults below
#   SUBSCRIBERS=50 LINES=2000 WRK_SECONDS=5 scripts/bench-server.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

SUBSCRIBERS="${SUBSCRIBERS:-200}"
LINES="${LINES:-10000}"
WRK_SECONDS="${WRK_SECONDS:-10}"
WRK_CONNECTIONS="${WRK_CONNECTIONS:-64}"
PACE_SECONDS="${PACE_SECONDS:-0.002}"
TOKEN="bench-token-$(date +%s)-$$"

if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing wrk" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
  else
    echo "error: wrk is needed (apt-get install wrk)" >&2
    exit 2
  fi
fi
command -v python3 >/dev/null || { echo "error: python3 is needed to print the lines" >&2; exit 2; }

echo "== building (release)" >&2
cargo build --release -q -p boitata-server --bin boitata-server --example sse_bench
target="${CARGO_TARGET_DIR:-$root/target}/release"

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/blueprints"
cat > "$work/emit.py" <<EOF
import sys, time
for i in range($LINES):
    sys.stdout.write("event line %d\n" % i)
    sys.stdout.flush()
    time.sleep($PACE_SECONDS)
EOF
cat > "$work/blueprints/bench.yaml" <<EOF
name: bench_events
description: waits for subscribers, then prints one line per event
entry: emit
params:
  delay: { default: "3" }
nodes:
  emit: { type: exec, command: "sleep {params.delay}; python3 -u $work/emit.py" }
EOF
cat > "$work/blueprints/noop.yaml" <<'EOF'
name: noop
entry: step
nodes:
  step: { type: exec, command: "echo ok" }
EOF

BOITATA_API_TOKEN="$TOKEN" BOITATA_LOG=warn "$target/boitata-server" \
  --blueprints-dir "$work/blueprints" --data-dir "$work/data" --bind 127.0.0.1:0 \
  --config /dev/null 2> "$work/server.log" &
server_pid=$!
url=""
for _ in $(seq 1 100); do
  url="$(grep -o 'http://127.0.0.1:[0-9]*' "$work/server.log" | head -n1 || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "error: the server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
auth=(-H "Authorization: Bearer $TOKEN")

post_run() { # blueprint task -> run id
  curl -sf "${auth[@]}" -H 'content-type: application/json' \
    -d "{\"blueprint\":\"$1\",\"task\":\"$2\"}" "$url/api/runs" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'
}

echo "== SSE, live: $SUBSCRIBERS subscribers, $LINES lines" >&2
run_id="$(post_run bench_events "fan out")"
live="$("$target/examples/sse_bench" "$url" "$run_id" "$SUBSCRIBERS" "$TOKEN")"
events="$(curl -sf "${auth[@]}" -H 'accept: application/json' "$url/api/runs/$run_id/events" |
  python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')"

echo "== SSE, replay of the finished run: $SUBSCRIBERS subscribers" >&2
replay="$("$target/examples/sse_bench" "$url" "$run_id" "$SUBSCRIBERS" "$TOKEN")"

echo "== wrk: GET /api/runs ($WRK_CONNECTIONS connections, ${WRK_SECONDS}s)" >&2
for i in $(seq 1 20); do post_run noop "list filler $i" >/dev/null; done
sleep 1
wrk_out="$(wrk -t2 -c"$WRK_CONNECTIONS" -d"${WRK_SECONDS}s" --latency "${auth[@]}" "$url/api/runs")"
rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$wrk_out")"
p99="$(awk '$1 == "99%" {print $2}' <<<"$wrk_out")"
non2xx="$(awk '/Non-2xx/ {print $NF}' <<<"$wrk_out")"

peak_kb="$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status")"

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
echo
echo "boitata-server benchmark ($(nproc) cores)"
echo "  GET /api/runs (20 runs listed): ${rps} requests/s, p99 latency ${p99}${non2xx:+, non-2xx: $non2xx}"
echo "  SSE live:   $SUBSCRIBERS subscribers x $(field events_per_subscriber "$live") events (run has $events): $(field events_per_second "$live") events/s delivered over $(field streaming_seconds "$live") s (paced by the run's output: one line every ${PACE_SECONDS} s)"
echo "  SSE replay: $SUBSCRIBERS subscribers x $(field events_per_subscriber "$replay") events: $(field events_per_second "$replay") events/s delivered over $(field streaming_seconds "$replay") s"
echo "  server peak RSS: $((peak_kb / 1024)) MiB"
