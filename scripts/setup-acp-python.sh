#!/usr/bin/env bash
# Creates the Python virtualenv that boitata-agent's interoperability tests use: the
# official `agent-client-protocol` Python SDK from PyPI, a client nobody on this project
# wrote, drives `boitata-agent` over TCP and over --stdio.
#
#   scripts/setup-acp-python.sh            # creates target/acp-py-venv (skips if present)
#   BOITATA_ACP_PY_VENV=DIR scripts/setup-acp-python.sh
#
# The tests find the venv through BOITATA_ACP_PY_VENV, defaulting to target/acp-py-venv.
# Needs python3 with the venv module (Debian: apt-get install python3-venv; this script
# installs it when it can).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${BOITATA_ACP_PY_VENV:-$root/target/acp-py-venv}"
# The SDK version the interop client is written against (its API moves between minors).
sdk_version="${BOITATA_ACP_PY_SDK_VERSION:-0.12.1}"

if ! command -v python3 >/dev/null; then
  echo "python3 not found: installing python3 and python3-venv" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "python3 has no venv/ensurepip module: installing python3-venv" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import acp' 2>/dev/null; then
  have="$("$venv/bin/python" -m pip show agent-client-protocol 2>/dev/null | sed -n 's/^Version: //p')"
  if [ "$have" = "$sdk_version" ]; then
    echo "acp python venv ready: $venv (agent-client-protocol $have)" >&2
    exit 0
  fi
fi

mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "agent-client-protocol==$sdk_version"
echo "acp python venv ready: $venv (agent-client-protocol $sdk_version)" >&2
