#!/usr/bin/env bash
# Offline demo of the default (in-process) execution model: copies the example project
# examples/projects/wordcount into a fresh git repository in a temp dir, and lets the
# agent fix its failing test with the scripted provider (a recorded session: no model,
# no network, no API key). Prints the run's progress, the agent's final message, and
# the commit it made.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cargo build --quiet --bin boitata
boitata="$root/target/debug/boitata"

work="$(mktemp -d "${TMPDIR:-/tmp}/boitata-demo.XXXXXX")"
cp -R examples/projects/wordcount/. "$work/"
git -C "$work" init --quiet
git -C "$work" add -A
git -C "$work" -c user.name=demo -c user.email=demo@localhost commit --quiet -m "wordcount with a bug"
data="${BOITATA_DATA_DIR:-$work.data}"
echo "workspace: $work" >&2

"$boitata" --data-dir "$data" run "Make the tests pass" \
  --workspace "$work" --provider scripted --script examples/scripts/fix-wordcount.json

echo >&2
echo "the agent's commit:" >&2
git -C "$work" log --oneline -n 2 >&2
echo "run history: $boitata --data-dir $data runs list" >&2
