#!/usr/bin/env bash
# The SQLite store example (examples/sqlite-store), built and tested the way an outside crate
# would be: a copy in a temp dir, outside this workspace, depending on this checkout by path, with
# the workspace's locked dependency versions (rusqlite and its bundled SQLite are added to that
# lock) and its target dir. Its tests run memloop's store conformance suite.
#
# Usage: .ci/outside_sqlite.sh   (from anywhere; needs crates.io's index only if rusqlite's
# versions are not cached)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
example="$repo/examples/sqlite-store"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
crate="$scratch/sqlite-store"
mkdir "$crate"
cp -R "$example/Cargo.toml" "$example/src" "$example/tests" "$crate/"
# The example names memloop by its place in the repository (`../..`); the copy names this checkout.
grep -q 'path = "../.."' "$crate/Cargo.toml" || {
  echo "examples/sqlite-store/Cargo.toml: memloop must be a path dependency on ../.." >&2; exit 1; }
sed -i.orig "s|path = \"../..\"|path = \"$repo\"|" "$crate/Cargo.toml"
rm "$crate/Cargo.toml.orig"
cp "$repo/Cargo.lock" "$crate/Cargo.lock"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

cd "$crate"
echo "$ (in $crate) cargo fmt --check && cargo clippy --all-targets -- -D warnings && cargo test"
cargo fmt -- --check
cargo clippy --all-targets --quiet -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
cargo test --quiet
