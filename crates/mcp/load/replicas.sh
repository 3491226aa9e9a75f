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
#      replica 3 is killed (SIGKILL) a third of the way in;
#   4. the cost of a big project, as ratios measured in one run: on one replica, then behind
#      HAProxy + 3, the default mix (4 searches : 1 save) on a project of 200 memories, then all
#      four operations (RUN_BIG_MIX, search=2,save=1,load=1,manage=1) on a project of RUN_BIG
#      (10,000) memories, then the same four on another project of 200, in three rounds (the
#      even ones in the reverse order); it prints, per round, the big project's server CPU per
#      operation and p99 over the default mix's and over the same mix's on 200 memories, then
#      the medians of the rounds, and fails when a median exceeds 1.25x or 1.5x (RUN_ONLY=4 runs
#      it alone; it is not part of the default runs 1-3). Each round of each configuration has
#      projects of its own (a run's saves grow its project by thousands of memories).
# Each run prints ops/s, p50 / p99 per operation, server CPU per operation (and PostgreSQL's in
# runs 1 and 2: in run 3 the terminated backends take theirs with them), and
# reads back every acknowledged save (lost and doubled must be 0). Everything it started is
# stopped and the schema dropped on exit, also on failure or Ctrl-C.
#
# Needs: cargo, psql, haproxy (Debian's package). Settings (environment): RUN_CLIENTS (20),
# RUN_SECONDS (10), RUN_MIX (search=4,save=1), RUN_PROTOCOL (2025-06-18; 2026-07-28 for the
# stateless protocol), RUN_PG (libpq conninfo; default has sslmode=disable: TLS on loopback
# costs more than a search), RUN_ONLY (1, 2, 3 or 4: that run alone), RUN_SKIP_BUILD=1, RUN_BIG
# (10000), RUN_BIG_MIX (search=2,save=1,load=1,manage=1), RUN_WARM (3: seconds of unmeasured
# warm-up before each measured run), RUN_ROUNDS (3: rounds of the three runs, whose ratios' medians
# are held to the targets) and RUN_REPLICAS (3: the replicas behind HAProxy) for run 4.
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
seed() { # $1: the project's name, $2: how many memories (200)
  local memories="${2:-200}"
  project="$root/$1"
  mkdir -p "$project"
  echo "==> seeding $1 with $memories memories"
  start_server seed --token-rate 0
  load --url "$server_url" --clients 10 --operations $((memories / 10)) --mix save=1 \
    --seconds 1200 >/dev/null
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

# $1 replicas (numbered from 1) behind HAProxy: their pids and URLs in $replica_pids and
# $replica_urls, HAProxy's URL in $lb_url.
replicas() {
  local i u backends=()
  replica_pids=() replica_urls=()
  for i in $(seq 1 "$1"); do
    start_server "$i" --token-rate 0
    u="${server_url#http://}"
    backends+=("${u%/mcp}") replica_pids+=("$server_pid") replica_urls+=("$server_url")
  done
  start_haproxy "${backends[@]}"
}

# Three replicas behind HAProxy, named for runs 2 and 3: pid1..pid3, and url1, url2.
three_replicas() {
  replicas 3
  pid1="${replica_pids[0]}" pid2="${replica_pids[1]}" pid3="${replica_pids[2]}"
  url1="${replica_urls[0]}" url2="${replica_urls[1]}"
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
# Run 4's figures from one load client report: "CPU_MS_PER_OP P99_MS".
cost_of() { # $1: the report
  local cpu p99
  cpu="$(sed -n 's/^server CPU: .* ms in all, \([0-9.]*\) ms per operation$/\1/p' "$1")"
  p99="$(sed -n 's/^| all | .* | \([0-9.]*\) ms |$/\1/p' "$1")"
  echo "${cpu:-0} ${p99:-0}"
}

# One measured run of run 4: a warm-up of its own mix on its own project (RUN_WARM seconds, not
# measured: what is compared is the cost of an operation on a project the replicas serve, not the
# first reads of a cold one, which the cold_search bench measures), then the run, its report
# kept in $work/$1.$2.txt. Each configuration ($setup) and round has projects of its own, seeded
# before any is measured: a run's saves grow its project by thousands of memories, so a project
# measured again would no longer be of its size.
measure() { # $1: small, big or mix; $2: the round; $3: URL; then --server-pid arguments
  local which="$1" round="$2" target_url="$3" run_mix="$big_mix" size=200
  shift 3
  case "$which" in
    small) project="$root/small-200-$setup-$round" run_mix="$mix" ;;
    big) project="$root/big-$big-$setup-$round" size="$big" ;;
    mix) project="$root/mix-200-$setup-$round" ;;
  esac
  echo "==> 4. $label, round $round: $run_mix on $size memories, ${seconds} s (after ${warm} s of warm-up)"
  load --url "$target_url" --clients "$clients" --seconds "$warm" --mix "$run_mix" >/dev/null || status=1
  load --url "$target_url" --clients "$clients" --seconds "$seconds" --mix "$run_mix" "$@" \
    | tee "$work/$which.$round.txt" || status=1
}

# Run 4 on the servers in $@ (pids) behind $1 (URL): RUN_ROUNDS rounds, each measuring the
# default mix on the small project, the big mix on the big one and the big mix on another small
# one, back to back (every other round in the reverse order), so each round's ratios compare runs
# a minute apart: a machine whose speed drifts between minutes (seen: the same build and
# configuration 1.6 times dearer a few minutes later) moves all three together. Prints each
# round's ratios and their medians, and fails when a median is past its target.
ratio_run() { # $1: label, $2: URL, then server pids
  label="$1"
  local target_url="$2" round order
  shift 2
  local pid_args=()
  for p in "$@"; do pid_args+=(--server-pid "$p"); done
  for round in $(seq 1 "$rounds"); do
    order="small big mix"
    [ $((round % 2)) = 0 ] && order="mix big small"
    for which in $order; do
      measure "$which" "$round" "$target_url" "${pid_args[@]}"
    done
  done
  compare "$big_mix on $big memories over the default mix on 200" big small
  compare "$big_mix on $big memories over the same mix on 200" big mix
}

# Print one ratio of run 4 per round (the first run's server CPU per operation and p99 over the
# second's) and the medians, and fail when a median is past its target.
compare() { # $1: what is compared, $2, $3: which runs (big, small, mix)
  local round lines=""
  for round in $(seq 1 "$rounds"); do
    lines+="$(cost_of "$work/$2.$round.txt") $(cost_of "$work/$3.$round.txt")"$'\n'
  done
  python3 - "$label" "$1" "$lines" <<'PY' || status=1
import statistics, sys
label, what, lines = sys.argv[1], sys.argv[2], sys.argv[3]
cpus, p99s = [], []
for i, line in enumerate(l for l in lines.splitlines() if l.strip()):
    a_cpu, a_p99, b_cpu, b_p99 = map(float, line.split())
    cpu = a_cpu / b_cpu if b_cpu else float("inf")
    p99 = a_p99 / b_p99 if b_p99 else float("inf")
    cpus.append(cpu)
    p99s.append(p99)
    print(f"==> 4. {label}, {what}, round {i + 1}: server CPU per operation "
          f"{a_cpu:.3f} / {b_cpu:.3f} ms = {cpu:.2f}x; p99 {a_p99:.2f} / {b_p99:.2f} ms = {p99:.2f}x")
cpu, p99 = statistics.median(cpus), statistics.median(p99s)
print(f"==> 4. {label}, {what}: median of {len(cpus)} rounds: server CPU per operation "
      f"{cpu:.2f}x (target <= 1.25x); p99 {p99:.2f}x (target <= 1.5x)")
if not (cpu <= 1.25 and p99 <= 1.5):
    print(f"==> 4. {label}, {what}: over its target")
    sys.exit(1)
PY
}

if [ "$only" = 4 ]; then
  big="${RUN_BIG:-10000}"
  big_mix="${RUN_BIG_MIX:-search=2,save=1,load=1,manage=1}"
  warm="${RUN_WARM:-3}"
  rounds="${RUN_ROUNDS:-3}"
  for setup in one haproxy; do
    for round in $(seq 1 "$rounds"); do
      seed "small-200-$setup-$round" 200
      seed "mix-200-$setup-$round" 200
      seed "big-$big-$setup-$round" "$big"
    done
  done
  setup=one
  start_server 1 --token-rate 0
  ratio_run "one replica" "$server_url" "$server_pid"
  stop_all
  n="${RUN_REPLICAS:-3}"
  replicas "$n"
  setup=haproxy
  ratio_run "HAProxy + $n replicas" "$lb_url" "${replica_pids[@]}"
  stop_all
fi
exit "$status"
