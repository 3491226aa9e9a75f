#!/usr/bin/env bash
# memloop against the official MCP memory server, side by side over stdio (issue 67):
#
#   bash crates/mcp/load/peer_batches.sh
#
# Builds the release binary (`memloop`, crates/cli), installs @modelcontextprotocol/server-memory
# (pinned below) with npm into a temp dir, and drives each over stdio with the same facts in
# batches (crates/mcp/load/peer_batches.py, standard library only): memloop as `memloop --project
# DIR mcp` with one `context_save` of BATCH entries per call, the peer with one `create_entities`
# of BATCH entities per call (each carrying its fact as an observation; the peer keeps its graph
# in one JSONL file and does not fsync). Each prints facts/s and reads every fact back after
# the timed part. Needs cargo, node and npm (downloads the peer from npm once per run), python3.
# Settings (environment): FACTS (2000), BATCH (20), RUNS (3, each on fresh dirs),
# PEER_SKIP_BUILD=1 (use the built binary as it is), PEER_MEMLOOP_BIN (another memloop binary;
# implies no build), PEER_VERSION. Not run by CI (npm).
set -euo pipefail
cd "$(dirname "$0")/../../.."

runs="${RUNS:-3}"
peer_version="${PEER_VERSION:-2026.8.31}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin="${PEER_MEMLOOP_BIN:-$target/release/memloop}"
script="$PWD/crates/mcp/load/peer_batches.py"

if [ -z "${PEER_SKIP_BUILD:-}${PEER_MEMLOOP_BIN:-}" ]; then
  echo "==> cargo build -p memloop-cli --release"
  cargo build -q -p memloop-cli --release
fi
[ -x "$bin" ] || { echo "no $bin: build it (unset PEER_SKIP_BUILD)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "==> npm install @modelcontextprotocol/server-memory@$peer_version"
npm install -q --no-audit --no-fund --prefix "$work/npm" \
  "@modelcontextprotocol/server-memory@$peer_version" >/dev/null
peer_js="$work/npm/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
[ -f "$peer_js" ] || { echo "no $peer_js" >&2; exit 1; }

for run in $(seq "$runs"); do
  mkdir -p "$work/$run/proj" "$work/$run/home" "$work/$run/peer"
  MEMLOOP_HOME="$work/$run/home" python3 "$script" memloop "$bin" "$work/$run/proj"
  python3 "$script" peer "$(command -v node)" "$peer_js" "$work/$run/peer/memory.jsonl"
done
