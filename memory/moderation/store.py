"""The moderation tables over a `Database` (memory.moderation.types.ModerationStore).

Why an insert that does nothing on conflict: an action is recorded under its key before the
platform is asked, and only the process whose insert made the row asks; a repeat (the same
message delivered again after a restart, a second replica, a double approve) finds the row
and does nothing, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.dialects import postgresql, sqlite

from memory.db.migrate import Database
from memory.db.records import Records
from memory.db.rows import AUTHOR_LEN, NAME_LEN, check_key, clean_text, utcnow
from memory.moderation.models import ModActionRow, ModMemberRow, ModProposalRow, ModRulesRow
from memory.moderation.types import ActionDraft, GroupRules, ModAction, Proposal

_ACTIONS = Records(ModActionRow, ModAction)
_PROPOSALS = Records(ModProposalRow, Proposal)


class SqlModerationStore:
    """Each method is one transaction or one read."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def _insert(self, table: type) -> Any:
        return (postgresql.insert if self._db.dialect == "postgresql" else sqlite.insert)(table)

    async def rules(self, platform: str, chat_id: str) -> GroupRules:
        query = select(ModRulesRow.rules).where(
            ModRulesRow.platform == platform, ModRulesRow.chat_id == chat_id
        )
        found = await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())
        return GroupRules.of(found)

    async def all_rules(self) -> list[tuple[str, str, GroupRules]]:
        query = select(ModRulesRow.platform, ModRulesRow.chat_id, ModRulesRow.rules).order_by(
            ModRulesRow.id
        )
        rows = await self._db.read(lambda conn: conn.execute(query).all())
        return [(p, c, GroupRules.of(r)) for p, c, r in rows]

    async def set_rules(self, platform: str, chat_id: str, rules: GroupRules, by: str) -> None:
        check_key("moderated chat", platform, chat_id)
        values = {"rules": rules.as_json(), "updated_at": utcnow(), "updated_by": by[:AUTHOR_LEN]}
        bind = (
            self._insert(ModRulesRow)
            .values(platform=platform, chat_id=chat_id, **values)
            .on_conflict_do_update(index_elements=["platform", "chat_id"], set_=values)
        )
        await self._db.write(lambda conn: conn.execute(bind))

    async def begin(self, draft: ActionDraft) -> ModAction | None:
        check_key("moderated chat", draft.platform, draft.chat_id)
        bind = (
            self._insert(ModActionRow)
            .values(
                platform=draft.platform,
                chat_id=draft.chat_id,
                key=draft.key[:NAME_LEN],
                user_id=draft.user_id,
                user_name=clean_text(draft.user_name)[:NAME_LEN],
                kind=draft.penalty.kind,
                seconds=draft.penalty.seconds,
                message_id=draft.message_id,
                reason=clean_text(draft.reason)[:2000],
                source=draft.source[:AUTHOR_LEN],
                state="started",
                detail="",
                created_at=utcnow(),
            )
            .on_conflict_do_nothing(index_elements=["platform", "chat_id", "key"])
            .returning(ModActionRow.id)
        )

        def write(conn: Connection) -> int | None:
            found = conn.execute(bind).scalar_one_or_none()
            return int(found) if found is not None else None

        action_id = await self._db.write(write)
        if action_id is None:
            return None
        return await _ACTIONS.written(self._db, action_id)

    async def end(self, action_id: int, state: str, detail: str = "") -> None:
        bind = (
            update(ModActionRow)
            .where(ModActionRow.id == action_id)
            .values(state=state, detail=detail[:2000], finished_at=utcnow())
        )
        await self._db.write(lambda conn: conn.execute(bind))

    async def log(self, platform: str, chat_id: str, limit: int = 10) -> list[ModAction]:
        query = (
            _ACTIONS.select()
            .where(ModActionRow.platform == platform, ModActionRow.chat_id == chat_id)
            .order_by(ModActionRow.id.desc())
            .limit(limit)
        )
        return await _ACTIONS.all(self._db, query)

    async def joined(self, platform: str, chat_id: str, user_id: str, at: datetime) -> None:
        check_key("moderated chat", platform, chat_id)
        bind = (
            self._insert(ModMemberRow)
            .values(platform=platform, chat_id=chat_id, user_id=user_id, joined_at=at)
            .on_conflict_do_update(
                index_elements=["platform", "chat_id", "user_id"], set_={"joined_at": at}
            )
        )
        await self._db.write(lambda conn: conn.execute(bind))

    async def joined_at(self, platform: str, chat_id: str, user_id: str) -> datetime | None:
        query = select(ModMemberRow.joined_at).where(
            ModMemberRow.platform == platform,
            ModMemberRow.chat_id == chat_id,
            ModMemberRow.user_id == user_id,
        )
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    async def propose(self, draft: Proposal) -> Proposal:
        values = {
            name: getattr(draft, name)
            for name in draft.__dataclass_fields__
            if name not in ("id", "decided_by")
        }
        values["text"] = clean_text(draft.text)[:4000]
        values["user_name"] = clean_text(draft.user_name)[:NAME_LEN]
        values["reason"] = clean_text(draft.reason)[:2000]
        bind = self._insert(ModProposalRow).values(**values).returning(ModProposalRow.id)
        new_id = await self._db.write(lambda conn: int(conn.execute(bind).scalar_one()))
        return await _PROPOSALS.written(self._db, new_id)

    async def proposal(self, platform: str, chat_id: str, proposal_id: int) -> Proposal | None:
        query = _PROPOSALS.select().where(
            ModProposalRow.id == proposal_id,
            ModProposalRow.platform == platform,
            ModProposalRow.chat_id == chat_id,
        )
        return await _PROPOSALS.one(self._db, query)

    async def decide(self, proposal_id: int, state: str, by: str) -> bool:
        bind = (
            update(ModProposalRow)
            .where(ModProposalRow.id == proposal_id, ModProposalRow.state == "open")
            .values(state=state, decided_by=by[:AUTHOR_LEN])
        )
        return await self._db.write(lambda conn: conn.execute(bind).rowcount == 1)
