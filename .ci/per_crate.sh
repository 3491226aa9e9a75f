#!/usr/bin/env bash
# Every workspace crate's targets (lib, tests, examples, benches) compile on their own:
# `cargo check -p CRATE --all-targets` with no features and with all of them. A workspace build unifies features across crates, so a test
# that needs a feature (or a dependency's feature) only another crate turns on compiles there and
# fails for whoever types `cargo test -p CRATE`; this catches it. Type-checked only (no code generation or
# linking: a feature missing for a test is a type error, and the check costs a fraction of a
# build); the tests themselves run in the workspace step.
#
# Usage: .ci/per_crate.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."

members="$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
meta = json.load(sys.stdin)
ids = set(meta["workspace_members"])
for package in meta["packages"]:
    if package["id"] in ids:
        print(package["name"])
')"
[ -n "$members" ] || { echo "cargo metadata listed no workspace member" >&2; exit 1; }

failed=()
for crate in $members; do
  for features in "" "--all-features"; do
    echo "--> cargo check -p $crate --all-targets $features"
    # shellcheck disable=SC2086 # $features is one flag or none
    if ! cargo check -p "$crate" --all-targets --quiet $features; then
      failed+=("cargo check -p $crate --all-targets $features")
    fi
  done
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "these test builds do not compile on their own (enable the feature they need in" >&2
  echo "[dev-dependencies], or give the target required-features):" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
