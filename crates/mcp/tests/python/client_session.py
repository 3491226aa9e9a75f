"""Drive `memloop mcp` with the official MCP Python SDK's stdio client.

usage: client_session.py <memloop binary> <project dir> <MEMLOOP_HOME> <outside dir>
Exits 0 when every check passed; prints what failed otherwise.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError


def payload(result):
    assert result.content, "tool result has no content"
    return json.loads(result.content[0].text)


async def main(binary, project, home, outside):
    env = dict(os.environ, MEMLOOP_HOME=home)
    params = StdioServerParameters(command=binary, args=["--project", project, "mcp", "--reveal-store"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.serverInfo.name == "memloop", init.serverInfo

            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"context_load", "context_search", "context_save", "context_manage"}, tools
            for t in tools.values():
                assert t.description and t.inputSchema.get("properties", {}).get("project_path"), t

            # Unknown project: registered false with a hint, nothing written.
            loaded = payload(await session.call_tool("context_load", {"project_path": project}))
            assert loaded["available"] and not loaded["known"], loaded
            assert loaded["registered"] is False and "init_project" in loaded["hint"], loaded
            assert len(loaded["project"]["id"]) == 12 and loaded["project_id"] == loaded["project"]["id"]

            # A batch: every type, plus a secret that must be refused.
            entries = [
                {"type": "session_summary", "title": "Session one", "content": "Migrated the billing service to Postgres."},
                {"type": "decision", "title": "Database", "content": "Use Postgres 16 for billing; MySQL is retired.", "tags": ["db"]},
                {"type": "change", "content": "Renamed invoice_total to amount_due in the billing schema."},
                {"type": "knowledge", "title": "Grafana board", "content": "Billing latency lives on the grafana board billing-p99."},
                {"type": "todo", "title": "Fix flaky CI", "content": "The payments integration test times out on CI."},
                {"type": "knowledge", "title": "aws", "content": "key is AKIAIOSFODNN7EXAMPLE for prod"},
            ]
            refused_batch = await session.call_tool("context_save", {"project_path": project, "entries": entries})
            rejected = payload(refused_batch)
            assert refused_batch.isError and rejected["code"] == "batch_refused" and rejected["written"] == 0, rejected
            refused = rejected["results"][5]
            assert refused["status"] == "refused" and refused["code"] == "secret_refused", refused
            assert [r["status"] for r in rejected["results"][:5]] == ["not_written"] * 5, rejected
            assert "AKIA" not in json.dumps(rejected), "the secret was echoed back"
            # Without the secret, the batch is saved whole, once per idempotency key.
            args = {"project_path": project, "entries": entries[:5], "idempotency_key": "py-batch-1"}
            saved = payload(await session.call_tool("context_save", args))
            assert saved["written"] == 5 and saved["replayed"] is False, saved
            again = payload(await session.call_tool("context_save", args))
            assert again["replayed"] is True and again["results"] == saved["results"], again
            paths = [r["path"] for r in saved["results"][:5]]
            assert paths[0].startswith("sessions/") and paths[1] == "decisions/database.md", paths
            assert paths[4] == "todos/fix-flaky-ci.md", paths

            # Search it back, ranked, with content and score; scoped search.
            found = payload(await session.call_tool("context_search", {"project_path": project, "query": "postgres billing database"}))
            assert found["mode"] == "bm25" and found["results"], found
            top = found["results"][0]
            assert "Postgres" in top["content"] and top["score"] > 0, top
            scoped = payload(await session.call_tool("context_search", {"project_path": project, "query": "postgres", "scope": "decisions", "limit": 3}))
            assert [r["path"] for r in scoped["results"]] == ["decisions/database.md"], scoped

            # Load: index, recent sessions, todos, decisions.
            loaded = payload(await session.call_tool("context_load", {"project_path": project}))
            assert loaded["known"] and loaded["last_session"], loaded
            assert "decisions/database.md" in loaded["index"]["content"], loaded["index"]
            assert loaded["recent_sessions"][0]["content"].startswith("Migrated"), loaded
            assert [t["path"] for t in loaded["open_todos"]] == ["todos/fix-flaky-ci.md"], loaded
            assert [d["path"] for d in loaded["decisions"]] == ["decisions/database.md"], loaded
            assert loaded["registered"] and loaded["pending_items"] == ["Fix flaky CI"], loaded
            assert loaded["active_decisions"][0].startswith("Database"), loaded
            assert loaded["recent_sessions"][0]["summary"].startswith("Migrated"), loaded

            # Manage: list, update, delete.
            listed = payload(await session.call_tool("context_manage", {"project_path": project, "action": "list"}))
            assert len(listed["memories"]) == 5, listed
            found = payload(await session.call_tool("context_search", {"project_path": project, "query": "database", "scope": "decisions"}))
            version = next(r["version"] for r in found["results"] if r["path"] == "decisions/database.md")
            updated = payload(await session.call_tool("context_manage", {"project_path": project, "action": "update", "target": "decisions/database.md", "content": "Use Postgres 17.", "expected_version": version}))
            assert updated["updated"] == "decisions/database.md", updated
            deleted = payload(await session.call_tool("context_manage", {"project_path": project, "action": "delete", "target": "todos/fix-flaky-ci.md"}))
            assert deleted["deleted"] == "todos/fix-flaky-ci.md", deleted
            loaded = payload(await session.call_tool("context_load", {"project_path": project}))
            assert loaded["open_todos"] == [], loaded

            # The index as a resource.
            resources = (await session.list_resources()).resources
            uri = f"memloop://project/{loaded['project']['id']}/MEMORY.md"
            assert str(resources[0].uri) == uri, resources
            contents = (await session.read_resource(uri)).contents[0]
            text = contents.text
            assert "decisions/database.md" in text and "todos/fix-flaky-ci.md" not in text, text
            assert contents.mimeType == resources[0].mimeType == "text/markdown", (contents, resources[0])
            assert updated["description"] == "Use Postgres 17.", updated
            assert "Use Postgres 17." in text, text

            # Hostile paths: a target escaping the memory dir, a project outside the root.
            hostile = await session.call_tool("context_manage", {"project_path": project, "action": "delete", "target": "../../../etc/passwd.md"})
            assert hostile.isError and payload(hostile)["refused"], hostile
            outside_res = await session.call_tool("context_load", {"project_path": outside})
            assert outside_res.isError and "outside" in payload(outside_res)["reason"], outside_res
            relative = await session.call_tool("context_search", {"project_path": "../x", "query": "a"})
            assert relative.isError, relative

            # A symlink out of the memory dir: a tool error for update and delete alike.
            memory_dir = loaded["project"]["memory_dir"]
            secret_file = os.path.join(outside, "target.md")
            with open(secret_file, "w") as f:
                f.write("---\nname: t\n---\nkeep me\n")
            os.symlink(secret_file, os.path.join(memory_dir, "knowledge", "link.md"))
            for action in ("update", "delete"):
                r = await session.call_tool("context_manage", {"project_path": project, "action": action, "target": "knowledge/link.md", "content": "x"})
                assert r.isError and "available" not in payload(r), (action, r)
            assert open(secret_file).read() == "---\nname: t\n---\nkeep me\n"

            # An oversized entry refuses its batch: nothing of it is written.
            big = [{"type": "knowledge", "title": "big", "content": "x" * 70000}, {"type": "todo", "title": "small", "content": "ok"}]
            saved = payload(await session.call_tool("context_save", {"project_path": project, "entries": big}))
            assert [r["status"] for r in saved["results"]] == ["refused", "not_written"], saved
            assert saved["results"][0]["code"] == "too_large", saved

            # A credential already in a hand-written file is redacted in every answer.
            token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
            with open(os.path.join(memory_dir, "knowledge", "hand.md"), "w") as f:
                f.write(f"---\nname: ci bot\ndescription: ci bot\n---\nThe ci bot token is {token} today.\n")
            for tool, args in (("context_search", {"query": "ci bot token"}), ("context_load", {})):
                r = payload(await session.call_tool(tool, dict(args, project_path=project)))
                assert token not in json.dumps(r), (tool, r)
            r = payload(await session.call_tool("context_search", {"project_path": project, "query": "ci bot token"}))
            assert "[redacted: " in json.dumps(r) and r["redacted"]["count"] >= 1, r

            # A served project whose own settings point its memory outside it is refused.
            sub = os.path.join(project, "cloned")
            os.makedirs(os.path.join(sub, ".memloop"), exist_ok=True)
            stolen = os.path.join(outside, "stolen")
            with open(os.path.join(sub, ".memloop", "settings.local.json"), "w") as f:
                json.dump({"memory_dir": stolen}, f)
            r = await session.call_tool("context_save", {"project_path": sub, "entries": [{"type": "todo", "content": "x"}]})
            assert r.isError and "outside the project" in payload(r)["reason"], r
            assert not os.path.exists(stolen), "memory written outside the project"

            # A malformed request: a JSON-RPC error, and the server keeps serving.
            try:
                await session.read_resource("memloop://project/000000000000/MEMORY.md")
                raise AssertionError("reading an unknown resource did not fail")
            except McpError as e:
                assert e.error.code != 0, e.error
            again = payload(await session.call_tool("context_search", {"project_path": project, "query": "grafana"}))
            assert again["results"][0]["path"] == "knowledge/grafana-board.md", again
    print("python mcp client: all checks passed")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
