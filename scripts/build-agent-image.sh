#!/usr/bin/env bash
# Build the sandbox image with Boitata's agent, `boitata-agent-rust:latest`, without a
# container registry: the base image (scripts/build-base-image.sh, if missing), the
# `boitata-agent` binary (cargo, on the host), then
# `docker build -f examples/boitata-agent-rust.Dockerfile` with a build context holding
# only that binary. Does nothing when the image already holds this very binary.
#
#   scripts/build-agent-image.sh                     # release build of the agent
#   scripts/build-agent-image.sh --debug             # debug build (faster to compile)
#   BOITATA_AGENT_PROFILE=debug scripts/build-agent-image.sh
#   BOITATA_AGENT_IMAGE=name:tag BOITATA_BASE_IMAGE=name:tag scripts/build-agent-image.sh
#   FORCE=1 scripts/build-agent-image.sh             # rebuild the image even if current
#
# The image carries the binary's SHA-256 and the base image's id as labels
# (boitata.agent.sha256, boitata.base.id): a changed binary or base means a rebuild.
# The binary is stripped when `strip` is available (a debug build goes
# from ~55 MB to ~27 MB). The host build works in the image because both are Debian 12
# (glibc 2.36); on another host, build on Debian 12 or set BOITATA_BASE_IMAGE to an
# image with the host's glibc.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

IMAGE="${BOITATA_AGENT_IMAGE:-boitata-agent-rust:latest}"
BASE="${BOITATA_BASE_IMAGE:-boitata-base:bookworm}"
PROFILE="${BOITATA_AGENT_PROFILE:-release}"
for arg in "$@"; do
  case "$arg" in
    --debug) PROFILE=debug ;;
    --release) PROFILE=release ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "build-agent-image: unknown argument $arg (use --debug or --release)" >&2; exit 2 ;;
  esac
done

say() { printf 'build-agent-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

case "$PROFILE" in
  release) cargo_profile=(--release); profile_dir=release ;;
  debug|dev) cargo_profile=(); profile_dir=debug ;;
  *) die "BOITATA_AGENT_PROFILE=$PROFILE: use release or debug" ;;
esac

command -v docker >/dev/null 2>&1 || die "docker CLI not found; install Docker Engine (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}); start it (e.g. 'service docker start') or set DOCKER_HOST"

# Where cargo puts binaries: $CARGO_TARGET_DIR, a configured target-dir, or ./target.
target_dir="$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null ||
  true)"
target_dir="${target_dir:-${CARGO_TARGET_DIR:-$root/target}}"
mkdir -p "$target_dir"

# One build at a time (tests may ask for the image from several processes at once).
exec 9>"$target_dir/.boitata-agent-image.lock"
flock 9

BOITATA_BASE_IMAGE="$BASE" scripts/build-base-image.sh

say "building boitata-agent ($profile_dir)"
cargo build --quiet "${cargo_profile[@]}" -p boitata-agent --bin boitata-agent
binary="$target_dir/$profile_dir/boitata-agent"
[[ -x "$binary" ]] || die "cargo did not produce $binary"

sha="$(sha256sum "$binary" | cut -d' ' -f1)"
base_id="$(docker image inspect -f '{{.Id}}' "$BASE")"
if [[ "${FORCE:-0}" != "1" ]]; then
  have_sha="$(docker image inspect -f '{{ index .Config.Labels "boitata.agent.sha256" }}' "$IMAGE" 2>/dev/null || true)"
  have_base="$(docker image inspect -f '{{ index .Config.Labels "boitata.base.id" }}' "$IMAGE" 2>/dev/null || true)"
  if [[ "$have_sha" == "$sha" && "$have_base" == "$base_id" ]]; then
    say "$IMAGE is up to date (boitata-agent $profile_dir, sha256 ${sha:0:12}); nothing to do (FORCE=1 rebuilds)"
    exit 0
  fi
fi

# A build context with the binary alone, at the path the Dockerfile expects.
context="$(mktemp -d "${TMPDIR:-/tmp}/boitata-agent-image.XXXXXX")"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/target/release"
if command -v strip >/dev/null 2>&1; then
  strip -o "$context/target/release/boitata-agent" "$binary"
else
  cp "$binary" "$context/target/release/boitata-agent"
fi
cp examples/boitata-agent-rust.Dockerfile "$context/Dockerfile"

previous="$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
say "building $IMAGE on $BASE"
docker build --quiet \
  -f "$context/Dockerfile" \
  --build-arg "BASE=$BASE" \
  --label "boitata.agent.sha256=$sha" \
  --label "boitata.agent.profile=$profile_dir" \
  --label "boitata.base.id=$base_id" \
  -t "$IMAGE" \
  "$context" >/dev/null 2> >(grep -v -e '^DEPRECATED: The legacy builder' -e '^ *Install the buildx' -e '^ *https://docs.docker.com/go/buildx' -e '^$' >&2)
# The image this one replaces, unless a container or another tag still uses it.
if [[ -n "$previous" && "$previous" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]]; then
  docker image rm "$previous" >/dev/null 2>&1 || true
fi
size="$(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
say "built $IMAGE ($size; boitata-agent $profile_dir, sha256 ${sha:0:12})"
