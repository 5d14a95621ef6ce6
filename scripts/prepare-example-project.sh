#!/usr/bin/env bash
# Make the example project for the containerized demo and tests: the vendored
# third-party library jsonpointer 3.0.0 (examples/projects/jsonpointer, unmodified
# sdist from PyPI) unpacked into DIR, with one function broken
# (examples/projects/jsonpointer/break-escape.patch), committed into a fresh git
# repository. Its tests (`python3 -m unittest tests`) then fail 3 of 27.
#
#   scripts/prepare-example-project.sh DIR     # DIR must be absent or empty
#
# Needs tar, git and nothing else; no network.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
project="$root/examples/projects/jsonpointer"
sdist="$project/jsonpointer-3.0.0.tar.gz"
expected_sha256="2b2d729f2091522d61c3b31f82e11870f60b68f43fbc705cb76bf4b832af59ef"

[[ $# -eq 1 ]] || { echo "usage: $0 DIR" >&2; exit 2; }
dest="$1"
if [[ -e "$dest" && -n "$(ls -A -- "$dest")" ]]; then
  echo "prepare-example-project: $dest is not empty" >&2
  exit 1
fi
actual="$(sha256sum "$sdist" | cut -d' ' -f1)"
[[ "$actual" == "$expected_sha256" ]] || {
  echo "prepare-example-project: $sdist has SHA-256 $actual, expected $expected_sha256" >&2
  exit 1
}

mkdir -p "$dest"
tar -xzf "$sdist" -C "$dest" --strip-components=1 --no-same-owner
git -C "$dest" init --quiet --initial-branch=main
git -C "$dest" apply "$project/break-escape.patch"
printf '__pycache__/\n*.pyc\n' > "$dest/.gitignore"
git -C "$dest" add -A
git -C "$dest" -c user.name=boitata-demo -c user.email=demo@localhost -c commit.gpgsign=false \
  commit --quiet -m "jsonpointer 3.0.0 (with a bug in escape)"
