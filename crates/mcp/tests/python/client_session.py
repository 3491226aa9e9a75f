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
    params = StdioServerParameters(command=binary, args=["--project", project, "mcp"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.serverInfo.name == "memloop", init.serverInfo

            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"context_load", "context_search", "context_save", "context_manage"}, tools
            for t in tools.values():
                assert t.description and t.inputSchema.get("properties", {}).get("project_path"), t

            # Unknown project: known false, nothing written.
            loaded = payload(await session.call_tool("context_load", {"project_path": project}))
            assert loaded["available"] and not loaded["known"], loaded
            assert len(loaded["project"]["id"]) == 12

            # A batch: every type, plus a secret that must be refused.
            entries = [
                {"type": "session_summary", "title": "Session one", "content": "Migrated the billing service to Postgres."},
                {"type": "decision", "title": "Database", "content": "Use Postgres 16 for billing; MySQL is retired.", "tags": ["db"]},
                {"type": "change", "content": "Renamed invoice_total to amount_due in the billing schema."},
                {"type": "knowledge", "title": "Grafana board", "content": "Billing latency lives on the grafana board billing-p99."},
                {"type": "todo", "title": "Fix flaky CI", "content": "The payments integration test times out on CI."},
                {"type": "knowledge", "title": "aws", "content": "key is AKIAIOSFODNN7EXAMPLE for prod"},
            ]
            saved = payload(await session.call_tool("context_save", {"project_path": project, "entries": entries}))
            assert saved["written"] == 5 and saved["refused"] == 1, saved
            refused = saved["results"][5]
            assert refused["status"] == "refused" and refused["code"] == "secret_refused", refused
            assert "AKIA" not in json.dumps(saved), "the secret was echoed back"
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
            assert [d["path"] for d in loaded["active_decisions"]] == ["decisions/database.md"], loaded

            # Manage: list, update, delete.
            listed = payload(await session.call_tool("context_manage", {"project_path": project, "action": "list"}))
            assert len(listed["memories"]) == 5, listed
            updated = payload(await session.call_tool("context_manage", {"project_path": project, "action": "update", "target": "decisions/database.md", "content": "Use Postgres 17."}))
            assert updated["updated"] == "decisions/database.md", updated
            deleted = payload(await session.call_tool("context_manage", {"project_path": project, "action": "delete", "target": "todos/fix-flaky-ci.md"}))
            assert deleted["deleted"] == "todos/fix-flaky-ci.md", deleted
            loaded = payload(await session.call_tool("context_load", {"project_path": project}))
            assert loaded["open_todos"] == [], loaded

            # The index as a resource.
            resources = (await session.list_resources()).resources
            uri = f"memloop://project/{loaded['project']['id']}/MEMORY.md"
            assert str(resources[0].uri) == uri, resources
            text = (await session.read_resource(uri)).contents[0].text
            assert "decisions/database.md" in text and "todos/fix-flaky-ci.md" not in text, text

            # Hostile paths: a target escaping the memory dir, a project outside the root.
            hostile = await session.call_tool("context_manage", {"project_path": project, "action": "delete", "target": "../../../etc/passwd.md"})
            assert hostile.isError and payload(hostile)["refused"], hostile
            outside_res = await session.call_tool("context_load", {"project_path": outside})
            assert outside_res.isError and "outside" in payload(outside_res)["reason"], outside_res
            relative = await session.call_tool("context_search", {"project_path": "../x", "query": "a"})
            assert relative.isError, relative

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
