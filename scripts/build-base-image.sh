#!/usr/bin/env bash
# Build the local sandbox base image `boitata-base:bookworm` without a container registry.
#
#   scripts/build-base-image.sh            # build if absent
#   BOITATA_BASE_IMAGE=name:tag scripts/build-base-image.sh
#   FORCE=1 scripts/build-base-image.sh    # rebuild even if present
#
# Order of preference:
#   1. the image already exists: nothing to do;
#   2. a local `debian:bookworm-slim` image exists: tag it (after adding git,
#      ca-certificates and python3 through `docker build` if they are missing);
#   3. debootstrap a minbase bookworm with git, ca-certificates and python3 from the
#      Debian mirror this machine's apt is configured with, then `docker import`.
#
# The mirror is read from /etc/apt/sources.list and /etc/apt/sources.list.d/*
# (one-line and deb822 formats); set DEBIAN_MIRROR=URL to choose another.
set -euo pipefail

IMAGE="${BOITATA_BASE_IMAGE:-boitata-base:bookworm}"
SUITE="bookworm"
PACKAGES="git,ca-certificates,python3"

say() { printf 'build-base-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v docker >/dev/null 2>&1 || die "docker CLI not found; install Docker Engine (apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "cannot reach the Docker daemon (DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}); start it (e.g. 'service docker start') or set DOCKER_HOST"

if [[ "${FORCE:-0}" != "1" ]] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  say "$IMAGE already exists; nothing to do (FORCE=1 rebuilds)"
  exit 0
fi

# --- 2. a local debian:bookworm-slim ---------------------------------------------------
if docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
  say "using the local debian:bookworm-slim image"
  if docker run --rm debian:bookworm-slim sh -c 'command -v git && command -v python3 && test -d /etc/ssl/certs' >/dev/null 2>&1; then
    docker tag debian:bookworm-slim "$IMAGE"
  else
    say "adding git, ca-certificates and python3 to it (needs the image's apt sources to be reachable)"
    printf 'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates python3 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*\n' \
      | docker build -t "$IMAGE" -
  fi
  say "built $IMAGE"
  exit 0
fi

# --- 3. debootstrap ----------------------------------------------------------------------
# Print the first Debian mirror URI configured for apt that serves the main archive
# (not -security / -updates / third-party repositories).
configured_mirror() {
  local f
  # one-line format: deb [opts] URI SUITE COMPONENTS...
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    awk '$1 == "deb" {
           i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
           uri = $i; suite = $(i + 1)
           if (suite ~ /^(bookworm|stable|trixie|bullseye|sid|unstable|testing)$/ && uri ~ /debian\/?$/) { print uri; exit }
         }' "$f"
  done
  # deb822 format: stanzas with URIs: and Suites:
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         {
           uris = ""; suites = ""; types = ""; enabled = "yes"
           for (k = 1; k <= NF; k++) {
             if ($k ~ /^URIs:/)    { uris = $k;    sub(/^URIs:[ \t]*/, "", uris) }
             if ($k ~ /^Suites:/)  { suites = $k;  sub(/^Suites:[ \t]*/, "", suites) }
             if ($k ~ /^Types:/)   { types = $k;   sub(/^Types:[ \t]*/, "", types) }
             if ($k ~ /^Enabled:/) { enabled = $k; sub(/^Enabled:[ \t]*/, "", enabled) }
           }
           if (enabled == "no" || types !~ /(^| )deb( |$)/) next
           n = split(suites, s, /[ \t]+/)
           for (j = 1; j <= n; j++) {
             if (s[j] ~ /^(bookworm|stable|trixie|bullseye|sid|unstable|testing)$/) {
               split(uris, u, /[ \t]+/); if (u[1] ~ /debian\/?$/) { print u[1]; exit }
             }
           }
         }' "$f"
  done
}

MIRROR="${DEBIAN_MIRROR:-}"
if [[ -z "$MIRROR" ]]; then
  MIRROR="$(configured_mirror | head -n 1)"
fi
[[ -n "$MIRROR" ]] || die "no Debian mirror found in /etc/apt/sources.list or /etc/apt/sources.list.d/*; set DEBIAN_MIRROR=URL"
say "no local debian:bookworm-slim; debootstrapping $SUITE (minbase + ${PACKAGES//,/ }) from $MIRROR"

if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap with apt-get"
  [[ "$(id -u)" == "0" ]] || die "debootstrap is missing and installing it needs root: apt-get install debootstrap"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
[[ "$(id -u)" == "0" ]] || die "debootstrap needs root; re-run as root (sudo $0)"

ROOTFS="$(mktemp -d "${TMPDIR:-/tmp}/boitata-base.XXXXXX")"
cleanup() { rm -rf --one-file-system "$ROOTFS"; }
trap cleanup EXIT

if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1; then
  tail -n 30 "$ROOTFS.log" >&2 || true
  rm -f "$ROOTFS.log"
  die "debootstrap failed (log above)"
fi
rm -f "$ROOTFS.log"

# Keep the image small: drop apt's caches and package lists, docs and man pages.
chroot "$ROOTFS" apt-get clean >/dev/null 2>&1 || true
rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin \
       "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/usr/share/doc/* \
       "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/* "$ROOTFS"/var/log/*.log
# Nothing from the build host should leak into the image.
: >"$ROOTFS/etc/hostname"
: >"$ROOTFS/etc/resolv.conf"

say "importing into docker as $IMAGE"
tar --numeric-owner -C "$ROOTFS" -c . \
  | docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["/bin/bash"]' \
      - "$IMAGE" >/dev/null
say "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
