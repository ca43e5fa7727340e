"""Tool calls from MCP servers: one row each, written after the call, read by the console."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import datetime

from sqlalchemy import insert, select

from memory.db.migrate import Database
from memory.usage.models import ToolCallRow


@dataclass(frozen=True)
class ToolCallRecord:
    """One MCP tool call, for usage and the console: what the tool loop writes, whole."""

    server: str
    tool: str
    platform: str
    chat_id: str
    user_id: str
    duration_ms: int
    outcome: str  # ok | error | timeout | down | refused | cancelled | bad_arguments


@dataclass(frozen=True)
class ToolCallEntry(ToolCallRecord):
    """A stored call and when it was written."""

    created_at: datetime


class ToolCallStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def add(self, call: ToolCallRecord) -> None:
        # Bounded to the column widths: server and tool names come from outside.
        row = asdict(call) | {
            "server": call.server[:64],
            "tool": call.tool[:256],
            "duration_ms": max(0, call.duration_ms),
            "outcome": call.outcome[:16],
        }
        await self._db.write(lambda conn: conn.execute(insert(ToolCallRow), [row]))

    async def recent(self, limit: int = 50) -> list[ToolCallEntry]:
        t = ToolCallRow
        cols = [getattr(t, field.name) for field in fields(ToolCallEntry)]
        query = select(*cols).order_by(t.id.desc()).limit(limit)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [ToolCallEntry(*row) for row in rows]
