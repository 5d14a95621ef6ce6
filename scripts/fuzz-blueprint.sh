#!/bin/sh
# Feeds random inputs (arbitrary bytes, mutated and randomly assembled blueprints) to
# blueprint parsing and validation for a while and reports how many it tried.
#
#   scripts/fuzz-blueprint.sh [SECONDS]      (default 300)
#
# A panic fails the run and prints the input (proptest shrinks it). Also:
#   PROPTEST_CASES=100000 cargo test -p boitata-blueprint --test all fuzz
set -eu
cd "$(dirname "$0")/.."
BOITATA_FUZZ_SECS="${1:-300}" exec cargo test -p boitata-blueprint --test all \
    fuzz_for_a_while -- --ignored --nocapture
