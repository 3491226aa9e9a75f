# Sourced by run.sh and replicas.sh (not run on its own): a run's work dir and PostgreSQL schema,
# its bearer token, and `memloop mcp --http` servers on free loopback ports, all taken down on
# exit (servers stopped, schema dropped, work dir removed), also on failure or Ctrl-C.
#
# The caller sets $pg (libpq conninfo) and $bin (the memloop binary), then calls
# `load_setup NAME`. That sets $work, $schema, $url (the database URL on that schema), $root (the
# servers' project root), $token (also in $work/tokens) and $pids (what stop_all stops; a caller
# adds its own background jobs).

# Stop every process in $pids and wait for it.
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

load_cleanup() {
  local status=$?
  stop_all
  psql "$pg" -XAtqc "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 \
    || echo "could not drop schema $schema" >&2
  rm -rf "$work"
  exit "$status"
}

# $1: the run's name (in the schema's and the token's names).
load_setup() {
  work="$(mktemp -d)"
  schema="memloop_$1_$$_$(date +%s)"
  pids=()
  trap load_cleanup EXIT
  trap 'exit 130' INT TERM
  psql "$pg" -XAtqc "CREATE SCHEMA $schema" >/dev/null
  url="$pg options='-c search_path=$schema'"
  root="$work/root"
  mkdir -p "$root" "$work/home"
  token="$1-token-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$token" >"$work/tokens"
  chmod 600 "$work/tokens"
}

# Start server $1 (a label: its log is $work/server$1.log) on a free loopback port, with any
# further arguments added to `memloop mcp`; its URL and pid go into $server_url / $server_pid.
start_server() {
  local label="$1" log="$work/server$1.log"
  shift
  : >"$log"
  env -i PATH="$PATH" HOME="$work/home" MEMLOOP_HOME="$work/home/base" MEMLOOP_LOG=warn \
    "$bin" --project "$root" mcp --root "$root" --http 127.0.0.1:0 \
    --token-file "$work/tokens" --database-url "$url" "$@" </dev/null >/dev/null 2>"$log" &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 200); do
    server_url="$(sed -n 's/^memloop: serving MCP on \(http:[^ ]*\).*/\1/p' "$log" | head -1)"
    [ -n "$server_url" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "server $label did not start:" >&2
  cat "$log" >&2
  exit 1
}
