"""Each MCP tool call written to storage (memory/tool_calls.py), for usage and the console."""

from __future__ import annotations

from dataclasses import asdict
from typing import Protocol

from core.tools.mcp.tools import ToolCallRecord


class ToolCallRows(Protocol):
    async def add(
        self,
        *,
        server: str,
        tool: str,
        platform: str,
        chat_id: str,
        user_id: str,
        duration_ms: int,
        outcome: str,
    ) -> None: ...


class SqlCallRecorder:
    def __init__(self, rows: ToolCallRows) -> None:
        self._rows = rows

    async def record(self, call: ToolCallRecord) -> None:
        await self._rows.add(**asdict(call))
