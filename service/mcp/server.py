"""cuemem as an MCP server: ``search_memory``, ``remember`` and ``forget`` for one user.

``cuemem mcp --user U`` builds the backend (the HTTP API, or the library on the embedded default
or the configured services) and calls :func:`build_server` with it; an agent host that speaks MCP
over stdio (Claude Desktop, Cursor, an SDK client) then gets three tools:

- ``search_memory(query, k=5)``: the user's memories and the current conversation, each item
  with why it was found (the same JSON as the agent tool of that name); read-only, unless the
  backend was built to count what it returns as used (``cuemem mcp --reinforce``);
- ``remember(content, kind?)``: publish a statement the user asked to keep; it is searchable at
  once (working memory), and a memory once the workers processed it;
- ``forget(memory_id)``: a soft delete (kept for the audit, never recalled again).

The tools go through :class:`producers.agent_tools.MemoryTools`, so their validation and their
error texts are the agent tools'. An error comes back as a tool result with ``isError`` set (the
model sees the message and can correct itself), never as a protocol error.

Built on the official MCP Python SDK (``mcp`` >= 2, where FastMCP is ``MCPServer``); installed
with the ``mcp`` extra.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from producers.agent_tools import K_DEFAULT, K_MAX, K_MIN, REMEMBER, SEARCH_MEMORY, TOOL_SCHEMAS, MemoryTools

SERVER_NAME = "cuemem"
_DESCRIPTIONS = {s["function"]["name"]: s["function"]["description"] for s in TOOL_SCHEMAS}
FORGET_DESCRIPTION = (
    "Forget one of the user's memories by its id (an 'id' from search_memory), when the user asks "
    "you to forget it or says it is wrong. It is no longer recalled; the record stays for the audit."
)

Kind = Literal["preference", "fact", "profile", "task"]


def _result(reply: str) -> str:
    """Pass a MemoryTools reply through, or raise it as a tool error (``isError`` in MCP)."""
    data = json.loads(reply)
    if isinstance(data, dict) and set(data) == {"error"}:
        raise ToolError(str(data["error"]))
    return reply


def build_server(tools: MemoryTools, *, instructions: str | None = None) -> MCPServer:
    """An MCP server whose tools act for ``tools.user_id`` in ``tools.session_id``.

    The user is fixed by whoever starts the server, not chosen by the model: an agent host runs one
    server per user, and no tool argument can reach another user's memory.
    """
    server: MCPServer = MCPServer(
        SERVER_NAME,
        instructions=instructions
        or (
            "Long-term memory of the current user. Call search_memory before answering whenever the "
            "answer may depend on something the user said before; call remember when the user asks "
            "you to keep something."
        ),
        log_level="WARNING",
    )

    # Sync functions on purpose: the SDK runs them in a worker thread, so a blocking recall (Postgres,
    # Redis, HTTP) never stalls the stdio loop.
    # The schema shows the model the bounds; the SDK does not enforce them (json_schema_extra, not
    # min_length/ge/le): a recall's values are checked by parse_recall alone (in MemoryTools), so
    # the error names the field as the API's and the CLI's do.
    @server.tool(name=SEARCH_MEMORY, description=_DESCRIPTIONS[SEARCH_MEMORY])
    def search_memory(
        query: Annotated[
            str,
            Field(
                json_schema_extra={"minLength": 1},
                description="What to look for, in the user's words (Chinese or English).",
            ),
        ],
        k: Annotated[
            int,
            Field(
                json_schema_extra={"minimum": K_MIN, "maximum": K_MAX},
                description="How many memories to return at most.",
            ),
        ] = K_DEFAULT,
    ) -> str:
        return _result(tools.handle(SEARCH_MEMORY, {"query": query, "k": k}))

    @server.tool(name=REMEMBER, description=_DESCRIPTIONS[REMEMBER])
    def remember(
        content: Annotated[
            str, Field(min_length=1, description="The statement to remember, in the user's language.")
        ],
        kind: Annotated[Kind | None, Field(description="What kind of memory it is, when clear.")] = None,
    ) -> str:
        arguments: dict[str, str] = {"content": content}
        if kind is not None:
            arguments["kind"] = kind
        return _result(tools.handle(REMEMBER, arguments))

    @server.tool(name="forget", description=FORGET_DESCRIPTION)
    def forget(
        memory_id: Annotated[str, Field(min_length=1, description="The id of the memory to forget.")],
    ) -> str:
        return _result(tools.forget(memory_id))

    return server
