"""The team server's load run: clients of the official MCP Python SDK against `memloop mcp --http`.

usage: load_run.py --url URL [--url URL ...] --token TOKEN --root DIR [options]

Starts `--processes` worker processes (this script, `worker` mode), each running its share of
`--clients` SDK sessions as asyncio tasks; client i talks to `--url` number i mod len(urls), in
project `load-<k>` under `--root` (clients 2k and 2k+1 share a project, so every project is
written through two servers). Each client does `--ops` mixed operations (context_save,
context_search, context_load, context_manage list / update / delete), timing every call from the
client's side. With `--kill-apps`, a `psql` session terminates the database connections of
those application names every `--kill-every` seconds while the clients run.

A call that fails for a transient reason (the transport, `available: false`) is retried with the
same arguments, up to 20 times: a save carries an idempotency key, so a retry lands once; a
retried update that finds its own version, or a retried delete that finds nothing, counts as
done. Afterwards every acknowledged write is checked through the servers: each saved or updated
memory is listed and found by search with the content last acknowledged (or a later attempt),
each acknowledged delete is gone, and nothing else is there.

Prints a table; with `--json FILE` also writes the figures. Exits 0 when no operation failed
and no acknowledged write was lost, 1 otherwise; `--max-p50-ms`, `--max-p99-ms` and
`--min-ops-per-s` add targets to that verdict.
"""

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta

# The mix of 20 operations every client repeats (shuffled per client, the same for a seed):
# 30 % saves, 25 % searches, 15 % loads, 10 % lists, 15 % updates, 5 % deletes.
MIX = ["save"] * 6 + ["search"] * 5 + ["load"] * 3 + ["list"] * 2 + ["update"] * 3 + ["delete"]
TYPES = ["knowledge", "decision", "todo"]
WORDS = ["deploy", "staging", "billing", "latency", "schema", "rollback", "cache", "queue",
         "部署", "デプロイ", "배포", "развёртывание"]
ATTEMPTS = 20
CALL_TIMEOUT = timedelta(seconds=20)


class Transient(Exception):
    """A call that did not complete and may be retried."""


def payload(result):
    if result.structuredContent is not None:
        return result.structuredContent
    return json.loads(result.content[0].text) if result.content else {}


class Client:
    """One SDK session and what it saw."""

    def __init__(self, index, url, token, project, ops, seed):
        self.index, self.url, self.token, self.project = index, url, token, project
        self.ops = ops
        self.rng = random.Random(seed * 1000 + index)
        self.session = None
        self.stack = None
        self.latencies = {}   # op -> [ms of each completed operation, retries included]
        self.retries = 0      # attempts that failed transiently and were retried
        self.failed = []      # operations that never completed, or failed for good
        self.live = {}        # path -> {"token", "version", "possible": [contents]}
        self.deleted = set()  # paths whose delete was acknowledged
        self.reconnects = 0
        self.reasons = {}     # why calls were retried: reason -> count

    async def connect(self):
        from contextlib import AsyncExitStack
        from mcp import ClientSession
        from mcp.client.streamable_http import streamablehttp_client

        await self.close()
        self.stack = AsyncExitStack()
        headers = {"Authorization": f"Bearer {self.token}"}
        read, write, _ = await self.stack.enter_async_context(
            streamablehttp_client(self.url, headers=headers, timeout=20))
        self.session = await self.stack.enter_async_context(
            ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT))
        await self.session.initialize()
        # The SDK checks structured results against the tools' output schemas; list them once.
        await self.session.list_tools()

    async def close(self):
        if self.stack is not None:
            stack, self.stack, self.session = self.stack, None, None
            try:
                await stack.aclose()
            except BaseException:  # a broken session's teardown may raise anything
                pass

    async def call(self, tool, args):
        """The tool's answer, or Transient; a tool error is returned with `isError` set."""
        from mcp.shared.exceptions import McpError

        if self.session is None:
            try:
                self.reconnects += 1
                await self.connect()
            except Exception as e:  # noqa: BLE001 - any failure to connect is transient
                raise Transient(f"connect: {e!r}") from e
        try:
            result = await self.session.call_tool(tool, args)
        except McpError as e:
            raise Transient(f"{tool}: {e.error.message}") from e
        except Exception as e:  # noqa: BLE001 - the transport broke: open a new session
            await self.close()
            raise Transient(f"{tool}: {e!r}") from e
        answer = payload(result)
        if result.isError:
            answer = dict(answer, isError=True)
        elif answer.get("available") is False:
            raise Transient(f"{tool}: unavailable: {answer.get('reason')}")
        return answer

    async def op(self, name, tool, args, accept):
        """Run one operation until `accept(answer, attempt)` says it completed (True) or failed
        for good (a string); the latency includes retries."""
        started = time.perf_counter()
        last = None
        for attempt in range(ATTEMPTS):
            try:
                answer = await self.call(tool, args)
            except Transient as e:
                self.retries += 1
                last = str(e)
                reason = last[:100]
                self.reasons[reason] = self.reasons.get(reason, 0) + 1
                await asyncio.sleep(min(0.005 * (attempt + 1), 0.1))
                continue
            verdict = accept(answer, attempt)
            if verdict is True:
                self.latencies.setdefault(name, []).append((time.perf_counter() - started) * 1000)
                return answer
            last = verdict
            break
        self.failed.append(f"client {self.index} {name}: {last}")
        return None

    async def warm(self):
        """Open this client's project store (not timed, not counted)."""
        for attempt in range(ATTEMPTS):
            try:
                await self.call("context_manage", {"project_path": self.project, "action": "list"})
                return
            except Transient:
                await asyncio.sleep(0.05 * (attempt + 1))
        raise SystemExit(f"client {self.index}: the project store never opened")

    def pick(self):
        paths = sorted(self.live)
        return self.rng.choice(paths) if paths else None

    async def run(self):
        p = self.project
        plan = []
        while len(plan) < self.ops:
            block = MIX[:]
            self.rng.shuffle(block)
            plan.extend(block)
        for j, kind in enumerate(plan[: self.ops]):
            if kind in ("update", "delete") and not self.live:
                kind = "save"
            if kind == "delete" and len(self.live) < 3:
                kind = "update"
            if kind == "save":
                await self.save(j)
            elif kind == "search":
                query = self.rng.choice([self.rng.choice(WORDS)] + [v["token"] for v in self.live.values()])
                await self.op("search", "context_search", {"project_path": p, "query": query, "limit": 5},
                              lambda a, _: True if not a.get("isError") else f"search: {a}")
            elif kind == "load":
                await self.op("load", "context_load", {"project_path": p},
                              lambda a, _: True if a.get("registered") else f"load: {a}")
            elif kind == "list":
                await self.op("list", "context_manage", {"project_path": p, "action": "list"},
                              lambda a, _: True if isinstance(a.get("memories"), list) else f"list: {a}")
            elif kind == "update":
                await self.update(j)
            else:
                await self.delete()

    async def save(self, j):
        token = f"c{self.index}o{j}{uuid.uuid4().hex[:8]}"
        word = self.rng.choice(WORDS)
        kind = self.rng.choice(TYPES)
        content = f"{word} note {token}: client {self.index} operation {j}, 第 {j} 条记录."
        args = {"project_path": self.project, "idempotency_key": str(uuid.uuid4()),
                "entries": [{"type": kind, "title": f"{word} {token}", "content": content}]}

        def ok(a, _):
            r = (a.get("results") or [{}])[0]
            return True if not a.get("isError") and r.get("status") == "written" else f"save: {a}"

        a = await self.op("save", "context_save", args, ok)
        if a is not None:
            r = a["results"][0]
            self.live[r["path"]] = {"token": token, "version": r["version"], "possible": [content]}

    async def update(self, j):
        path = self.pick()
        entry = self.live[path]
        content = f"{entry['token']} updated at operation {j} by client {self.index}: {self.rng.choice(WORDS)}"
        entry["possible"].append(content)  # it may land even if its answer is lost
        args = {"project_path": self.project, "action": "update", "target": path,
                "content": content, "expected_version": entry["version"]}
        landed = {}

        def ok(a, attempt):
            if not a.get("isError"):
                landed["version"] = a.get("version")
                return True
            # A retry whose first attempt landed finds the version moved on.
            if attempt > 0 and a.get("code") == "version_conflict":
                landed["version"] = a.get("current_version")
                landed["uncertain"] = True
                return True
            return f"update: {a}"

        if await self.op("update", "context_manage", args, ok) is not None:
            entry["version"] = landed["version"]
            if not landed.get("uncertain"):
                entry["possible"] = [content]

    async def delete(self):
        path = self.pick()
        args = {"project_path": self.project, "action": "delete", "target": path}

        def ok(a, attempt):
            if not a.get("isError"):
                return True
            # A retry whose first attempt landed finds nothing to delete.
            if attempt > 0 and "no such memory" in str(a.get("reason", a)):
                return True
            return f"delete: {a}"

        if await self.op("delete", "context_manage", args, ok) is not None:
            del self.live[path]
            self.deleted.add(path)

    def report(self):
        return {"index": self.index, "project": self.project, "latencies": self.latencies,
                "retries": self.retries, "failed": self.failed, "reconnects": self.reconnects, "reasons": self.reasons,
                "live": self.live, "deleted": sorted(self.deleted)}


async def worker(config):
    """Worker mode: connect this process's clients, say `ready`, wait for `go`, run them."""
    clients = [Client(i, config["urls"][i % len(config["urls"])], config["token"],
                      project_of(config["root"], i), config["ops"], config["seed"])
               for i in config["clients"]]
    await asyncio.gather(*(c.connect() for c in clients))
    # Each client's project store opened (its schema migrated) before the clock starts, as on
    # a team server that has been running; not timed.
    await asyncio.gather(*(c.warm() for c in clients))
    print(json.dumps({"ready": True}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    started, cpu = time.time(), time.process_time()
    await asyncio.gather(*(c.run() for c in clients))
    ended, cpu = time.time(), time.process_time() - cpu
    for c in clients:
        await c.close()
    print(json.dumps({"started": started, "ended": ended, "cpu_s": cpu, "clients": [c.report() for c in clients]}),
          flush=True)


def project_of(root, i):
    return os.path.join(root, f"load-{i // 2 % 4}")


class Killer(threading.Thread):
    """Terminates the given application names' database connections every `every` seconds
    through one `psql` session."""

    def __init__(self, pg, apps, every):
        super().__init__(daemon=True)
        self.every, self.stop, self.killed, self.rounds = every, threading.Event(), 0, 0
        names = ",".join("'" + a.replace("'", "''") + "'" for a in apps)
        self.sql = ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    f"WHERE pid <> pg_backend_pid() AND application_name IN ({names});\n")
        self.psql = subprocess.Popen(["psql", pg, "-XAtq", "-v", "ON_ERROR_STOP=0"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def run(self):
        while not self.stop.wait(self.every):
            self.psql.stdin.write(self.sql)
            line = self.psql.stdout.readline()
            if not line:
                break
            self.killed += int(line.strip() or 0)
            self.rounds += 1

    def finish(self):
        self.stop.set()
        self.join(timeout=5)
        try:
            self.psql.stdin.close()
            self.psql.wait(timeout=5)
        except Exception:  # noqa: BLE001
            self.psql.kill()


def process_cpu(pids):
    """CPU seconds used so far by `pids` (Linux /proc; 0 where unreadable)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return total


def machine_cpu():
    """(busy, all) CPU seconds of the whole machine so far (Linux /proc/stat; zeros elsewhere)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / hz, sum(ticks) / hz


def percentile(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def verify(urls, token, reports):
    """Every acknowledged write, read back through the servers: (lost, stale, resurrected,
    unexpected, checked)."""
    problems = {"lost": [], "stale": [], "resurrected": [], "unexpected": []}
    by_project = {}
    for r in reports:
        p = by_project.setdefault(r["project"], {"live": {}, "deleted": set()})
        p["live"].update(r["live"])
        p["deleted"].update(r["deleted"])
    checkers = [Client(-1 - i, urls[i % len(urls)], token, None, 0, 0) for i in range(min(8, 2 * len(urls)))]
    await asyncio.gather(*(c.connect() for c in checkers))
    checked = 0
    for n, (project, p) in enumerate(sorted(by_project.items())):
        c = checkers[n % len(checkers)]
        listing = await c.op("list", "context_manage", {"project_path": project, "action": "list"},
                             lambda a, _: True if isinstance(a.get("memories"), list) else f"{a}")
        listed = {m["path"] for m in (listing or {}).get("memories", [])}
        for path in p["live"]:
            if path not in listed:
                problems["lost"].append(f"{project}/{path}")
        problems["resurrected"] += [f"{project}/{x}" for x in p["deleted"] if x in listed]
        problems["unexpected"] += [f"{project}/{x}" for x in listed - set(p["live"]) - p["deleted"]]

    async def check(c, project, path, entry):
        found = await c.op("search", "context_search",
                           {"project_path": project, "query": entry["token"], "limit": 5, "detail": "full"},
                           lambda a, _: True if not a.get("isError") else f"{a}")
        hit = next((h for h in (found or {}).get("results", []) if h.get("path") == path), None)
        if hit is None:
            if f"{project}/{path}" not in problems["lost"]:  # not already missing from the list
                problems["lost"].append(f"{project}/{path} (not found by search)")
        elif not any(hit.get("content", "").strip() == x.strip() for x in entry["possible"]):
            problems["stale"].append(f"{project}/{path}: {hit.get('content')!r} not in {entry['possible']!r}")

    work = [(project, path, entry) for project, p in by_project.items() for path, entry in p["live"].items()]

    async def lane(k):
        nonlocal checked
        for project, path, entry in work[k::len(checkers)]:
            await check(checkers[k], project, path, entry)
            checked += 1

    await asyncio.gather(*(lane(k) for k in range(len(checkers))))
    for c in checkers:
        await c.close()
    return problems, checked


def run_workers(args):
    per = [list(range(args.clients))[k::args.processes] for k in range(args.processes)]
    procs = []
    for clients in per:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, bufsize=1)
        proc.stdin.write(json.dumps({"urls": args.url, "token": args.token, "root": args.root,
                                     "clients": clients, "ops": args.ops, "seed": args.seed}) + "\n")
        procs.append(proc)
    try:
        for proc in procs:
            line = proc.stdout.readline()
            if not line or not json.loads(line).get("ready"):
                raise SystemExit("a worker did not start")
        killer = None
        if args.kill_apps:
            killer = Killer(args.pg, args.kill_apps.split(","), args.kill_every)
            killer.start()
        wall = time.perf_counter()
        cpu0 = (process_cpu(args.server_pids), machine_cpu())
        for proc in procs:
            proc.stdin.write("go\n")
        results = []
        for proc in procs:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("a worker died")
            results.append(json.loads(line))
        wall = time.perf_counter() - wall
        cpu1 = (process_cpu(args.server_pids), machine_cpu())
        cpu = {"servers_s": cpu1[0] - cpu0[0], "machine_busy_s": cpu1[1][0] - cpu0[1][0],
               "machine_all_s": cpu1[1][1] - cpu0[1][1]}
        if killer is not None:
            killer.finish()
        for proc in procs:
            proc.wait(timeout=30)
        return results, wall, killer, cpu
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def die_with_parent():
    """On Linux, have the kernel kill this worker when the driver dies (however it dies)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        die_with_parent()
        asyncio.run(worker(json.loads(sys.stdin.readline())))
        return
    # Stopped from outside (a timeout): the workers are killed on the way out (run_workers).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", action="append", required=True, help="a server's /mcp URL (repeat)")
    ap.add_argument("--token", required=True)
    ap.add_argument("--root", required=True, help="the dir the servers serve (--root); projects go under it")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--ops", type=int, default=100, help="operations per client")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--pg", default="host=127.0.0.1 port=5432 user=root dbname=test")
    ap.add_argument("--kill-apps", default="", help="comma-separated application_name values to terminate")
    ap.add_argument("--kill-every", type=float, default=0.1)
    ap.add_argument("--server-pids", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                    help="comma-separated server process ids, to report their CPU time per operation")
    ap.add_argument("--label", default="load")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--max-p50-ms", type=float)
    ap.add_argument("--max-p99-ms", type=float)
    ap.add_argument("--min-ops-per-s", type=float)
    args = ap.parse_args()
    for i in range(4):
        os.makedirs(os.path.join(args.root, f"load-{i}"), exist_ok=True)

    results, wall, killer, cpu = run_workers(args)
    reports = [c for r in results for c in r["clients"]]
    span = max(r["ended"] for r in results) - min(r["started"] for r in results)
    by_op = {}
    for c in reports:
        for op, values in c["latencies"].items():
            by_op.setdefault(op, []).extend(values)
    every = [v for values in by_op.values() for v in values]
    failed = [f for c in reports for f in c["failed"]]
    retries = sum(c["retries"] for c in reports)
    # Acknowledged writes: saves, updates and deletes that completed.
    acked = sum(len(by_op.get(op, [])) for op in ("save", "update", "delete"))
    reasons = {}
    for c in reports:
        for r, n in c["reasons"].items():
            reasons[r] = reasons.get(r, 0) + n
    problems, checked = asyncio.run(verify(args.url, args.token, reports))
    figures = {
        "label": args.label, "clients": args.clients, "ops_per_client": args.ops, "processes": args.processes,
        "servers": len(args.url), "operations": len(every), "seconds": round(span, 3),
        "ops_per_s": round(len(every) / span, 1) if span > 0 else 0.0,
        "p50_ms": round(percentile(every, 0.5), 2), "p99_ms": round(percentile(every, 0.99), 2),
        "max_ms": round(max(every), 2) if every else None,
        "failed": len(failed), "retried_calls": retries,
        "reconnects": sum(c["reconnects"] for c in reports),
        "connections_terminated": killer.killed if killer else 0,
        "kill_rounds": killer.rounds if killer else 0,
        "acknowledged_writes": acked, "checked_memories": checked,
        "lost": len(problems["lost"]), "stale": len(problems["stale"]),
        "resurrected": len(problems["resurrected"]), "unexpected": len(problems["unexpected"]),
        "cpu_ms_per_op": {
            "clients": round(1000 * sum(r["cpu_s"] for r in results) / max(1, len(every)), 2),
            "servers": round(1000 * cpu["servers_s"] / max(1, len(every)), 2) if args.server_pids else None,
            "machine": round(1000 * cpu["machine_busy_s"] / max(1, len(every)), 2),
        },
        "machine_busy": round(cpu["machine_busy_s"] / cpu["machine_all_s"], 3) if cpu["machine_all_s"] else None,
        "retry_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5]),
        "per_op": {op: {"n": len(v), "p50_ms": round(percentile(v, 0.5), 2), "p99_ms": round(percentile(v, 0.99), 2)}
                   for op, v in sorted(by_op.items())},
    }
    print(f"\n== {args.label}: {args.clients} SDK clients x {args.ops} ops, {args.processes} client processes, "
          f"{len(args.url)} servers ==")
    print(f"{'operation':<10} {'n':>6} {'p50 ms':>8} {'p99 ms':>8}")
    for op, f in figures["per_op"].items():
        print(f"{op:<10} {f['n']:>6} {f['p50_ms']:>8.2f} {f['p99_ms']:>8.2f}")
    print(f"{'all':<10} {figures['operations']:>6} {figures['p50_ms']:>8.2f} {figures['p99_ms']:>8.2f}")
    print(f"throughput {figures['ops_per_s']} ops/s over {figures['seconds']} s; failed operations "
          f"{figures['failed']}; retried calls {retries}; reconnects {figures['reconnects']}")
    c = figures["cpu_ms_per_op"]
    print(f"CPU per operation: clients {c['clients']} ms, servers {c['servers']} ms, whole machine {c['machine']} ms "
          f"(machine busy {100 * (figures['machine_busy'] or 0):.0f} % of {os.cpu_count()} cores)")
    if killer:
        print(f"connections terminated {killer.killed} in {killer.rounds} rounds (every {args.kill_every} s)")
    print(f"acknowledged writes {acked} (saves, updates, deletes); memories read back {checked}; lost {figures['lost']}, "
          f"stale {figures['stale']}, resurrected {figures['resurrected']}, unexpected {figures['unexpected']}")
    for kind in ("lost", "stale", "resurrected", "unexpected"):
        for p in problems[kind][:5]:
            print(f"  {kind}: {p}")
    for r, n in figures["retry_reasons"].items():
        print(f"  retried {n}x: {r}")
    for f in failed[:10]:
        print(f"  failed: {f}")
    verdict = []
    if failed:
        verdict.append(f"{len(failed)} operations failed")
    if any(problems.values()):
        verdict.append("acknowledged writes not read back as acknowledged")
    if len(every) != args.clients * args.ops:
        verdict.append(f"{len(every)} of {args.clients * args.ops} operations completed")
    if args.kill_apps and killer.killed == 0:
        verdict.append("no database connection was terminated")
    if args.max_p50_ms is not None and figures["p50_ms"] > args.max_p50_ms:
        verdict.append(f"p50 {figures['p50_ms']} ms > {args.max_p50_ms}")
    if args.max_p99_ms is not None and figures["p99_ms"] > args.max_p99_ms:
        verdict.append(f"p99 {figures['p99_ms']} ms > {args.max_p99_ms}")
    if args.min_ops_per_s is not None and figures["ops_per_s"] < args.min_ops_per_s:
        verdict.append(f"{figures['ops_per_s']} ops/s < {args.min_ops_per_s}")
    figures["verdict"] = verdict
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    print("verdict: " + ("ok" if not verdict else "; ".join(verdict)))
    sys.exit(1 if verdict else 0)


if __name__ == "__main__":
    main()
