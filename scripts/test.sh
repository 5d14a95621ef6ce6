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

cargo nextest run --workspace --no-fail-fast "$@"
