#!/usr/bin/env bash
# The README's "Add it to your project" section, run verbatim by an outside user: a new crate in a
# temp dir (outside this workspace) that depends on this checkout by path, with the README's
# program as its src/main.rs. The program asserts on what happened (exit code non-zero on failure).
#
# Usage: .ci/outside_user.sh   (from anywhere; needs network access to crates.io's index only if
# the versions in Cargo.lock are not cached)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
readme="$repo/README.md"

# The marked part of the README: its ```sh block (the commands) and its ```rust block (main.rs).
section() {
  awk '/<!-- outside-user: begin/ {on=1; next} /<!-- outside-user: end/ {on=0} on' "$readme"
}
fenced() { # $1: the fence's info string prefix (sh, rust)
  section | awk -v lang="$1" '
    /^```/ { if (inside) { inside=0; done=1; next } if (!done && index(substr($0, 4), lang) == 1) { inside=1; next } }
    inside'
}
commands="$(fenced sh)"
program="$(fenced rust)"
[ -n "$commands" ] || { echo "README: no sh block between the outside-user markers" >&2; exit 1; }
[ -n "$program" ] || { echo "README: no rust block between the outside-user markers" >&2; exit 1; }
grep -q -- '--path ../memloop' <<<"$commands" || {
  echo "README: the commands must add memloop with --path ../memloop" >&2; exit 1; }

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# The README's layout: a clone named `memloop` next to the new crate.
ln -s "$repo" "$scratch/memloop"
export MEMLOOP_HOME="$scratch/home"
# Reuse the workspace's dependency builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

cd "$scratch"
# Pin the workspace's locked dependency versions: `cargo new` runs the README's commands in the
# crate dir, where this lock file is picked up.
echo "$ (README commands, run in $scratch)"
printf '%s\n' "$commands"
bash -euo pipefail -c "
  $(sed -n '1p' <<<"$commands")
  cp '$repo/Cargo.lock' Cargo.lock
  $(sed -n '2,$p' <<<"$commands")
"
crate="$scratch/$(sed -n 's/^cargo new \([^ ]*\).*/\1/p' <<<"$commands")"
printf '%s\n' "$program" >"$crate/src/main.rs"
cd "$crate"
rustfmt --edition 2024 --check src/main.rs
cargo run --quiet
