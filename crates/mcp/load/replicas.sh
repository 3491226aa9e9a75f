#!/usr/bin/env bash
# The team server's throughput runs with the Rust load client (issue 54), loopback only:
#
#   bash crates/mcp/load/replicas.sh
#
# Builds the release server (`memloop`, PostgreSQL only) and the load client
# (crates/cli/examples/mcp_load_client.rs), makes a schema of its own on PostgreSQL
# (127.0.0.1:5432, database `test`, trust auth), and runs the load client (20 clients, 4 searches
# : 1 save, 10 s each) three times, each on a project of its own seeded with 200 memories:
#   1. one replica;
#   2. HAProxy (round-robin per request, `/health` checked every 100 ms) in front of three
#      replicas; then read-your-writes: a save answered by replica 1, searched through replica 2;
#   3. the same while every database connection of the replicas is terminated every 100 ms and
#      replica 3 is killed (SIGKILL) a third of the way in.
# Each run prints ops/s, p50 / p99 per operation, server CPU per operation (and PostgreSQL's in
# runs 1 and 2: in run 3 the terminated backends take theirs with them), and
# reads back every acknowledged save (lost and doubled must be 0). Everything it started is
# stopped and the schema dropped on exit, also on failure or Ctrl-C.
#
# Needs: cargo, psql, haproxy (Debian's package). Settings (environment): RUN_CLIENTS (20),
# RUN_SECONDS (10), RUN_MIX (search=4,save=1), RUN_PROTOCOL (2025-06-18; 2026-07-28 for the
# stateless protocol), RUN_PG (libpq conninfo; default has sslmode=disable: TLS on loopback
# costs more than a search), RUN_ONLY (1, 2 or 3: that run alone), RUN_SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/../../.."

clients="${RUN_CLIENTS:-20}"
seconds="${RUN_SECONDS:-10}"
mix="${RUN_MIX:-search=4,save=1}"
protocol="${RUN_PROTOCOL:-2025-06-18}"
pg="${RUN_PG:-host=127.0.0.1 port=5432 user=root dbname=test sslmode=disable}"
only="${RUN_ONLY:-}"
bin="$PWD/target/release/memloop"
client="$PWD/target/release/examples/mcp_load_client"

if [ -z "${RUN_SKIP_BUILD:-}" ]; then
  echo "==> cargo build --release -p memloop-cli --no-default-features --features postgres (server, load client)"
  cargo build -q --release -p memloop-cli --no-default-features --features postgres \
    --bin memloop --example mcp_load_client
fi
for f in "$bin" "$client"; do
  [ -x "$f" ] || { echo "no $f: build it (unset RUN_SKIP_BUILD)" >&2; exit 1; }
done
command -v haproxy >/dev/null || { echo "haproxy is not installed (apt-get install haproxy)" >&2; exit 1; }
psql "$pg" -XAtqc "select 1" >/dev/null || { echo "PostgreSQL unreachable: $pg" >&2; exit 1; }

source crates/mcp/load/servers.sh
load_setup replicas

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# HAProxy in front of the given host:port pairs; its URL goes into $lb_url.
start_haproxy() {
  local port servers="" i=0
  port="$(free_port)"
  for backend in "$@"; do
    servers+="    server r$i $backend check"$'\n'
    i=$((i + 1))
  done
  cat >"$work/haproxy.cfg" <<CFG
global
    maxconn 4000
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch 1
    retry-on conn-failure
frontend mcp
    bind 127.0.0.1:$port
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    timeout check 2s
    default-server inter 100ms fall 2 rise 2
$servers
CFG
  haproxy -db -f "$work/haproxy.cfg" </dev/null >"$work/haproxy.log" 2>&1 &
  pids+=("$!")
  lb_url="http://127.0.0.1:$port/mcp"
  for _ in $(seq 1 200); do
    curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "HAProxy did not come up:" >&2
  cat "$work/haproxy.log" >&2
  exit 1
}

load() {
  "$client" --token "$token" --project "$project" --protocol "$protocol" "$@"
}

# Each run has a project of its own seeded with 200 memories, so every setup starts from the same
# data (a run's saves grow its project by thousands).
seed() { # $1: the project's name
  project="$root/$1"
  mkdir -p "$project"
  echo "==> seeding $1 with 200 memories"
  start_server seed --token-rate 0
  load --url "$server_url" --clients 10 --operations 20 --mix save=1 --seconds 120 >/dev/null
  stop_all
}

status=0
if [ -z "$only" ] || [ "$only" = 1 ]; then
  seed billing-service-1
  echo "==> 1. one replica: $clients clients, $mix, ${seconds} s"
  start_server 1 --token-rate 0
  load --url "$server_url" --clients "$clients" --seconds "$seconds" --mix "$mix" \
    --server-pid "$server_pid" --postgres-cpu || status=1
  stop_all
fi

three_replicas() {
  start_server 1 --token-rate 0; url1="$server_url" pid1="$server_pid"
  start_server 2 --token-rate 0; url2="$server_url" pid2="$server_pid"
  start_server 3 --token-rate 0; url3="$server_url" pid3="$server_pid"
  hostport() { local u="${1#http://}"; echo "${u%/mcp}"; }
  start_haproxy "$(hostport "$url1")" "$(hostport "$url2")" "$(hostport "$url3")"
}

if [ -z "$only" ] || [ "$only" = 2 ]; then
  seed billing-service-2
  echo "==> 2. HAProxy + 3 replicas: $clients clients, $mix, ${seconds} s; then read-your-writes"
  three_replicas
  load --url "$lb_url" --clients "$clients" --seconds "$seconds" --mix "$mix" \
    --server-pid "$pid1" --server-pid "$pid2" --server-pid "$pid3" --postgres-cpu \
    --read-your-writes "$url1,$url2" || status=1
  stop_all
fi

if [ -z "$only" ] || [ "$only" = 3 ]; then
  seed billing-service-3
  echo "==> 3. HAProxy + 3 replicas, database connections terminated every 100 ms, replica 3 killed"
  three_replicas
  (
    while :; do
      psql "$pg" -XAtqc "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
        WHERE application_name IN ('memloop-mcp:$pid1','memloop-mcp:$pid2','memloop-mcp:$pid3')" \
        >>"$work/terminated" 2>/dev/null || true
      sleep 0.1
    done
  ) &
  pids+=("$!")
  ( sleep "$(echo "$seconds / 3" | bc -l)"; kill -9 "$pid3" 2>/dev/null; echo "killed replica 3 (pid $pid3)" ) &
  pids+=("$!")
  load --url "$lb_url" --clients "$clients" --seconds "$seconds" --mix "$mix" \
    --server-pid "$pid1" --server-pid "$pid2" --server-pid "$pid3" || status=1
  echo "database connections terminated: $(awk '{s+=$1} END {print s+0}' "$work/terminated")"
  stop_all
fi
exit "$status"
