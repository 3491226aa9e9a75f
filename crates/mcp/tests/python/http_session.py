"""Drive `memloop mcp --http` with the official MCP Python SDK's streamable HTTP client.

usage: http_session.py <url> <token> <project dir>
Exits 0 when every check passed; prints what failed otherwise.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def payload(result):
    assert result.content, "tool result has no content"
    return json.loads(result.content[0].text)


async def main(url, token, project):
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.serverInfo.name == "memloop", init.serverInfo
            tools = {t.name for t in (await session.list_tools()).tools}
            assert tools == {"context_load", "context_search", "context_save", "context_manage"}, tools
            saved = payload(await session.call_tool("context_save", {"project_path": project, "entries": [
                {"type": "decision", "title": "数据库", "content": "我们决定使用PostgreSQL作为主数据库。"},
                {"type": "knowledge", "title": "Deploys", "content": "Deploys run on Tuesdays after the staging check."},
            ]}))
            assert saved["written"] == 2, saved
            found = payload(await session.call_tool("context_search", {"project_path": project, "query": "数据库"}))
            assert found["results"] and found["results"][0]["title"] == "数据库", found
            loaded = payload(await session.call_tool("context_load", {"project_path": project}))
            assert loaded["registered"] is True, loaded
    print("all checks passed")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
