#!/usr/bin/env bash
# Boitata's main demo: the seed blueprint, examples/blueprints/containerized_task.yaml,
# on a real third-party project, in a real container, with the agent inside it.
#
#   scripts/demo.sh
#
# On a fresh machine with Rust, git and a Docker daemon (no registry needed) it:
#   1. builds what it needs: the sandbox base image (scripts/build-base-image.sh), the
#      agent image boitata-agent-rust:latest (scripts/build-agent-image.sh) and the
#      boitata CLI;
#   2. prepares the project: jsonpointer 3.0.0, a real library from PyPI vendored in
#      examples/projects/jsonpointer, unpacked into a fresh git repository in a temp
#      dir with one function (`escape`) broken (scripts/prepare-example-project.sh);
#   3. runs `boitata run --blueprint examples/blueprints/containerized_task.yaml` on
#      it, offline: a sandbox is provisioned, the repository checked out into it, its
#      tests run there and fail, the agent inside the sandbox (replaying the recorded
#      session examples/scripts/fix-jsonpointer.json with the scripted provider: no
#      model, no network, no key) repairs the function, the tests run again and pass,
#      and the sandbox is destroyed.
#
# The agent is built in debug mode by default (it compiles with the CLI, sharing its
# dependencies); BOITATA_AGENT_PROFILE=release builds an optimized one.
# For the in-process agent without Docker, see scripts/demo-local.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { printf 'demo: %s\n' "$*" >&2; }

command -v docker >/dev/null 2>&1 || { say "docker is not installed (apt-get install docker.io)"; exit 2; }
if ! docker info >/dev/null 2>&1; then
  say "starting the Docker daemon"
  service docker start >/dev/null 2>&1 || (nohup dockerd >/tmp/boitata-dockerd.log 2>&1 &)
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { say "cannot reach the Docker daemon: start it (service docker start) or set DOCKER_HOST"; exit 2; }
fi

say "building the boitata CLI and the agent"
cargo build --quiet --bin boitata --bin boitata-agent
export BOITATA_AGENT_PROFILE="${BOITATA_AGENT_PROFILE:-debug}"
scripts/build-agent-image.sh
target_dir="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
boitata="$target_dir/debug/boitata"

work="$(mktemp -d "${TMPDIR:-/tmp}/boitata-demo.XXXXXX")"
scripts/prepare-example-project.sh "$work/jsonpointer"
data="$work/data"
say "project: $work/jsonpointer (jsonpointer 3.0.0 with a bug in escape)"
echo >&2

status=0
"$boitata" --data-dir "$data" run "Make the tests pass" \
  --workspace "$work" \
  --blueprint examples/blueprints/containerized_task.yaml \
  --param repo="$work/jsonpointer" \
  --param test_command="python3 -m unittest" \
  --provider scripted --script examples/scripts/fix-jsonpointer.json || status=$?

echo >&2
if [[ $status -eq 0 ]]; then
  say "the run succeeded: the agent repaired jsonpointer inside the sandbox, and its tests pass there"
else
  say "the run ended with exit code $status"
fi
left="$(docker ps -aq --filter label=boitata.created_by=boitata --filter "label=boitata.run_id=$("$boitata" --data-dir "$data" runs list 2>/dev/null | awk 'NR == 2 { print $1 }')")"
if [[ -z "$left" ]]; then
  say "its sandbox is gone (docker ps shows none for the run)"
else
  say "warning: the run's sandbox is still there: $left"
fi
say "the host repository is untouched: git -C $work/jsonpointer status"
say "run history: $boitata --data-dir $data runs list"
exit "$status"
