"""Drive `memloop mcp --http` with the MCP Python SDK 2.x `Client`, in one protocol mode.

usage: http_client_v2.py <url> <token> <project dir> <mode>
<mode>: `2026-07-28` (stateless: no handshake, every request stands alone), `legacy` (the
initialize handshake of 2025-11-25 and before) or `auto` (probe `server/discover`, fall back to
the handshake). Exits 0 when every check passed; prints what failed otherwise.
"""

import asyncio
import json
import sys
import uuid

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client


def payload(result):
    assert not result.is_error, f"tool error: {result.content}"
    assert result.content, "tool result has no content"
    return json.loads(result.content[0].text)


async def main(url, token, project, mode):
    marker = uuid.uuid4().hex
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            if mode != "auto":
                want = "2026-07-28" if mode == "2026-07-28" else None
                if want:
                    assert client.protocol_version == want, client.protocol_version
                else:
                    assert client.protocol_version < "2026", client.protocol_version
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"context_load", "context_search", "context_save", "context_manage"}, tools
            key = str(uuid.uuid4())
            entries = [
                {"type": "decision", "title": f"数据库 {marker}", "content": "我们决定使用PostgreSQL作为主数据库。"},
                {"type": "knowledge", "title": f"Deploys {marker}", "content": f"Deploys {marker} run on Tuesdays."},
            ]
            saved = payload(await client.call_tool(
                "context_save", {"project_path": project, "idempotency_key": key, "entries": entries}))
            assert saved["written"] == 2, saved
            # The same key again (through whichever replica the balancer picks): the first
            # outcome, nothing written twice.
            again = payload(await client.call_tool(
                "context_save", {"project_path": project, "idempotency_key": key, "entries": entries}))
            assert again["written"] == 2 and again.get("replayed") is True, again
            found = payload(await client.call_tool(
                "context_search", {"project_path": project, "query": marker}))
            titles = [r["title"] for r in found["results"]]
            assert f"Deploys {marker}" in titles, found
            loaded = payload(await client.call_tool("context_load", {"project_path": project}))
            assert loaded["registered"] is True, loaded
            print(f"all checks passed ({client.protocol_version})")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
