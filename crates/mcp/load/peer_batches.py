"""Drive an MCP server over stdio (newline-delimited JSON-RPC) with N facts in batches of B.

Standard library only. Usage:
  peer_batches.py memloop BIN PROJECT_DIR   (memloop mcp; context_save with B entries per call)
  peer_batches.py peer    NODE SERVER_JS MEMORY_FILE
                                            (@modelcontextprotocol/server-memory; create_entities
                                             with B entities per call, each carrying its fact as
                                             its observation)
Settings: FACTS (2000), BATCH (20). Prints one line: `<server>: N facts in T s = R facts/s`.
Every call's answer is checked (an error ends the run), and the facts are read back once at the
end through read_graph (peer) or by the caller (memloop), outside the timed part.
"""

import json
import os
import subprocess
import sys
import time

FACTS = int(os.environ.get("FACTS", "2000"))
BATCH = int(os.environ.get("BATCH", "20"))


class Client:
    def __init__(self, argv, env):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.next_id = 0

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed its output (answer to {method} #{rid})")
            msg = json.loads(line)
            if msg.get("id") == rid:
                if "error" in msg:
                    raise SystemExit(f"{method}: {msg['error']}")
                return msg["result"]

    def start(self):
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "peer_batches", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tool(self, name, arguments):
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise SystemExit(f"{name}: {json.dumps(result)[:400]}")
        return result

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def fact(i):
    return f"Fact {i}: the service on port {8000 + i} is owned by team {i % 17}."


def run_memloop(binary, project):
    env = dict(os.environ, MEMLOOP_LOG="error")
    env.pop("MEMLOOP_MEMORY_DIR", None)
    c = Client([binary, "--project", project, "mcp"], env)
    c.start()
    start = time.perf_counter()
    for b in range(0, FACTS, BATCH):
        entries = [
            {"type": "knowledge", "title": f"fact {i:05d}", "content": fact(i)}
            for i in range(b, min(b + BATCH, FACTS))
        ]
        c.tool("context_save", {"project_path": project, "entries": entries})
    took = time.perf_counter() - start
    c.close()
    texts = []
    for root, _, files in os.walk(os.environ["MEMLOOP_HOME"]):
        texts += [open(os.path.join(root, f)).read() for f in files if f.endswith(".md")]
    text = "\n".join(texts)
    stored = sum(1 for i in range(FACTS) if fact(i) in text)
    if stored != FACTS:
        raise SystemExit(f"memloop: {stored} of {FACTS} facts read back")
    return took


def run_peer(node, server_js, memory_file):
    env = dict(os.environ, MEMORY_FILE_PATH=memory_file)
    c = Client([node, server_js], env)
    c.start()
    start = time.perf_counter()
    for b in range(0, FACTS, BATCH):
        # One entity per fact, carrying the fact as its observation: one call per batch, as
        # memloop's one context_save.
        entities = [
            {"name": f"fact {i:05d}", "entityType": "knowledge", "observations": [fact(i)]}
            for i in range(b, min(b + BATCH, FACTS))
        ]
        c.tool("create_entities", {"entities": entities})
    took = time.perf_counter() - start
    graph = c.tool("read_graph", {})
    text = graph["content"][0]["text"]
    c.close()
    stored = sum(1 for i in range(FACTS) if fact(i) in text)
    if stored != FACTS:
        raise SystemExit(f"peer: {stored} of {FACTS} facts read back")
    return took


def main():
    which = sys.argv[1]
    if which == "memloop":
        took = run_memloop(sys.argv[2], sys.argv[3])
    elif which == "peer":
        took = run_peer(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(f"unknown server {which}")
    print(f"{which}: {FACTS} facts in batches of {BATCH}: {took:.3f} s = {FACTS / took:,.0f} facts/s")


main()
