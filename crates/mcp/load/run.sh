#!/usr/bin/env bash
# The team server's load run (issue 46), loopback only, bounded (each of its two runs is stopped
# after 80 s; about a minute in all on the project's VM, plus the build):
#
#   bash crates/mcp/load/run.sh
#
# Builds the release binary (`memloop`, with PostgreSQL), starts two `memloop mcp --http
# 127.0.0.1:0 --token-file … --database-url …` processes on one PostgreSQL database (a schema of
# its own on 127.0.0.1:5432, trust auth, database `test`), and runs
# crates/mcp/tests/python/load_run.py twice: 20 clients of the official MCP Python SDK (2
# processes x 10 asyncio sessions, split across both servers) x 100 mixed operations, first
# quietly, then while a psql session terminates the servers' database connections every 100 ms.
# Each run prints per-operation latency (p50, p99), operations per second, failures and
# retries, then reads every acknowledged write back through the servers (lost must be 0).
# The servers are killed and the schema dropped on exit, also on failure or Ctrl-C.
#
# Needs: cargo, psql, python3 with venv and pip (the venv target/ci-mcp-venv with mcp==1.12.4
# and crates/mcp/tests/python/constraints.txt, as `.ci/run` builds it; created if missing,
# which downloads from PyPI once) or MEMLOOP_MCP_PYTHON naming a Python that has `mcp`.
# Settings (environment): LOAD_CLIENTS (20), LOAD_OPS (100), LOAD_PROCESSES (2),
# LOAD_KILL_EVERY (0.1 s), LOAD_PG (libpq conninfo of the database), LOAD_SKIP_BUILD=1 (use
# target/release/memloop as it is), LOAD_JSON_DIR (write each run's figures as JSON there),
# LOAD_RUNS (`both`, the default; `quiet` or `kills` for only that run, e.g. to profile a
# server during the quiet one).
set -euo pipefail
cd "$(dirname "$0")/../../.."

clients="${LOAD_CLIENTS:-20}"
ops="${LOAD_OPS:-100}"
processes="${LOAD_PROCESSES:-2}"
kill_every="${LOAD_KILL_EVERY:-0.1}"
pg="${LOAD_PG:-host=127.0.0.1 port=5432 user=root dbname=test}"
bin="$PWD/target/release/memloop"
script="$PWD/crates/mcp/tests/python/load_run.py"

if [ -z "${LOAD_SKIP_BUILD:-}" ]; then
  echo "==> cargo build -p memloop-cli --release --features postgres"
  cargo build -q -p memloop-cli --release --features postgres
fi
[ -x "$bin" ] || { echo "no $bin: build it (unset LOAD_SKIP_BUILD)" >&2; exit 1; }

python="${MEMLOOP_MCP_PYTHON:-}"
if [ -z "$python" ]; then
  venv="target/ci-mcp-venv"
  if ! "$venv/bin/python" -c "import mcp.client.streamable_http" 2>/dev/null; then
    echo "==> the MCP Python SDK into $venv (mcp==1.12.4, pinned dependencies)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q -c crates/mcp/tests/python/constraints.txt "mcp==1.12.4"
  fi
  python="$PWD/$venv/bin/python"
fi
"$python" -c "import mcp.client.streamable_http" || { echo "no MCP Python SDK in $python" >&2; exit 1; }
psql "$pg" -XAtqc "select 1" >/dev/null || { echo "PostgreSQL unreachable: $pg" >&2; exit 1; }

source crates/mcp/load/servers.sh
load_setup loadrun

start_server 1
url1="$server_url" pid1="$server_pid"
start_server 2
url2="$server_url" pid2="$server_pid"
echo "==> servers $url1 (pid $pid1) and $url2 (pid $pid2) on schema $schema"

run() {
  local label="$1"
  shift
  local json=()
  [ -n "${LOAD_JSON_DIR:-}" ] && json=(--json "$LOAD_JSON_DIR/$label.json")
  timeout --kill-after=5 80 "$python" "$script" --url "$url1" --url "$url2" --token "$token" --root "$root/$label" \
    --clients "$clients" --ops "$ops" --processes "$processes" --pg "$pg" --label "$label" \
    --server-pids "$pid1,$pid2" \
    "${json[@]}" "$@"
}

runs="${LOAD_RUNS:-both}"
case "$runs" in
  both | quiet | kills) ;;
  *) echo "LOAD_RUNS must be both, quiet or kills (not $runs)" >&2; exit 1 ;;
esac
status=0
if [ "$runs" != kills ]; then
  run quiet || status=1
fi
if [ "$runs" != quiet ]; then
  run kills --kill-apps "memloop-mcp:$pid1,memloop-mcp:$pid2" --kill-every "$kill_every" || status=1
fi
for n in 1 2; do
  if grep -qiE "panick|error" "$work/server$n.log"; then
    echo "server $n logged:" && grep -iE "panick|error" "$work/server$n.log" | sort | uniq -c | sort -rn | head -5
  fi
done
exit "$status"
