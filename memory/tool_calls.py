"""Tool calls from MCP servers: one row each, written after the call, read by the console."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select

from memory.migrate import Database
from memory.models import ToolCallRow


@dataclass(frozen=True)
class ToolCallEntry:
    created_at: datetime
    server: str
    tool: str
    platform: str
    chat_id: str
    user_id: str
    duration_ms: int
    outcome: str


class ToolCallStore:
    def __init__(self, database: Database) -> None:
        self._db = database

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
    ) -> None:
        row = {
            "server": server[:64],
            "tool": tool[:256],
            "platform": platform,
            "chat_id": chat_id,
            "user_id": user_id,
            "duration_ms": max(0, duration_ms),
            "outcome": outcome[:16],
        }
        await self._db.write(lambda conn: conn.execute(insert(ToolCallRow), [row]))

    async def recent(self, limit: int = 50) -> list[ToolCallEntry]:
        t = ToolCallRow
        cols = (t.created_at, t.server, t.tool, t.platform, t.chat_id, t.user_id)
        query = select(*cols, t.duration_ms, t.outcome).order_by(t.id.desc()).limit(limit)
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [ToolCallEntry(*row) for row in rows]
