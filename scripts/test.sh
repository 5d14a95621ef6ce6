#!/usr/bin/env bash
# Boitata's test suite: installs what the tests need on a fresh machine of this kind,
# then runs every test of the workspace with cargo-nextest.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -p boitata-core # extra arguments go to `cargo nextest run`
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

need_apt=()
command -v git >/dev/null || need_apt+=(git)
command -v pgrep >/dev/null || need_apt+=(procps)
# Run networks are closed off from the host with iptables rules (the daemon's own package).
command -v iptables >/dev/null || need_apt+=(iptables)
# The web UI tests drive a real headless browser (they fail under CI=true without it).
command -v chromium >/dev/null || need_apt+=(chromium)
command -v chromedriver >/dev/null || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo-nextest >/dev/null; then
  echo "cargo-nextest not found: installing it with cargo" >&2
  cargo install --locked cargo-nextest
fi

# The sandbox tests need a Docker daemon (under CI=true they fail without one), the
# locally built base image and the agent image (no registry is needed). The agent image
# gets a debug build of boitata-agent: the tests build the workspace in debug anyway,
# and the tests themselves rebuild the image whenever the binary changes.
if ! docker info >/dev/null 2>&1; then
  echo "starting the Docker daemon" >&2
  service docker start >/dev/null 2>&1 || (nohup dockerd >/tmp/boitata-dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
if docker info >/dev/null 2>&1; then
  scripts/build-base-image.sh
  BOITATA_AGENT_PROFILE=debug scripts/build-agent-image.sh
else
  echo "warning: no Docker daemon: the sandbox tests skip locally and fail under CI=true" >&2
fi

# boitata-agent's interoperability tests drive it with the official ACP Python SDK,
# installed into target/acp-py-venv (needs python3-venv; the script installs it).
scripts/setup-acp-python.sh ||
  echo "warning: no ACP Python SDK venv: the interop tests skip locally and fail under CI=true" >&2

cargo nextest run --workspace --no-fail-fast "$@"
