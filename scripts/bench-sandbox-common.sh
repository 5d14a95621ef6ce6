# Sourced by scripts/bench-sandbox.sh and scripts/bench-network.sh, with NAME set to the
# script's name and $1 its N: checks N and the daemon, makes sure IMAGE exists, builds
# the bench_sandbox example (release, or debug with BENCH_PROFILE=debug), and defines `say` and `stats`. Sets N, IMAGE,
# ROOT, BENCH and OUT (a temporary file of "NAME MILLISECONDS" lines).

N="${1:-20}"
IMAGE="${IMAGE:-boitata-base:bookworm}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "$NAME: N must be a positive integer, got '$N'" >&2; exit 2; }

say() { printf '%s: %s\n' "$NAME" "$*" >&2; }

docker info >/dev/null 2>&1 || { say "cannot reach the Docker daemon (DOCKER_HOST=${DOCKER_HOST:-unset}); start it or set DOCKER_HOST"; exit 1; }
docker image inspect "$IMAGE" >/dev/null 2>&1 || "$ROOT/scripts/build-base-image.sh"

# BENCH_PROFILE=debug skips a release build (the figures are mostly the daemon's time).
PROFILE="${BENCH_PROFILE:-release}"
case "$PROFILE" in
  release) PROFILE_DIR=release ;;
  debug) PROFILE_DIR=debug; PROFILE=dev ;;
  *) echo "$NAME: BENCH_PROFILE must be release or debug, got '$PROFILE'" >&2; exit 2 ;;
esac
say "building the bench ($PROFILE_DIR)"
(cd "$ROOT" && cargo build --quiet --profile "$PROFILE" -p boitata-orchestrator --example bench_sandbox)
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BENCH="$TARGET/$PROFILE_DIR/examples/bench_sandbox"

OUT="$(mktemp)"

stats() { # name -> "median p95" of the lines "name MS" in $OUT
  grep "^$1 " "$OUT" | awk '{ print $2 }' | sort -n | awk '
    { v[NR] = $1 }
    END {
      if (NR == 0) { print "nan nan"; exit }
      m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      k = int(0.95 * NR + 0.999999); if (k < 1) k = 1; if (k > NR) k = NR
      printf "%.1f %.1f\n", m, v[k]
    }'
}
