"""Each MCP tool call written to storage (memory/usage/tool_calls.py), for usage and the console."""

from __future__ import annotations

from typing import Protocol

from memory.usage.tool_calls import ToolCallRecord


class ToolCallRows(Protocol):
    async def add(self, call: ToolCallRecord) -> None: ...


class SqlCallRecorder:
    def __init__(self, rows: ToolCallRows) -> None:
        self._rows = rows

    async def record(self, call: ToolCallRecord) -> None:
        await self._rows.add(call)
