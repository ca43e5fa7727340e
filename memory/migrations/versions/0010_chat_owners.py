"""HTTP chats kept apart by kind, and threads bound to the user who first used them.

Why: a group request naming a person's user id as its chat id used to create (or reach)
the chat that person's private requests use. HTTP groups are now stored as `group:<id>`
(channels/http/chat_ids.py), so this migration renames the groups already stored, in
every table that names a chat by its id; a group whose id would not fit the column with
its prefix keeps its old id (and is no longer reachable by that name). `chat_owners`
records who first used each private thread id.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memory.migrations.columns import create_keyed_table

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FITS = "length({column}) <= 122"  # 128 with the 6 characters of "group:"
_HTTP_GROUPS = (
    "SELECT platform_chat_id FROM chats WHERE platform = 'http' AND chat_type = 'group' "
    "AND " + _FITS.format(column="platform_chat_id")
)


def upgrade() -> None:
    create_keyed_table(
        "chat_owners",
        "named_id",
        sa.Column("owner_id", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    for table in ("intake", "reminders"):  # they say the chat's kind themselves
        op.execute(
            f"UPDATE {table} SET chat_id = 'group:' || chat_id WHERE platform = 'http' "
            f"AND chat_type = 'group' AND {_FITS.format(column='chat_id')}"
        )
    for table in ("chat_settings", "usage", "tool_calls"):
        op.execute(
            f"UPDATE {table} SET chat_id = 'group:' || chat_id "
            f"WHERE platform = 'http' AND chat_id IN ({_HTTP_GROUPS})"
        )
    op.execute(
        "UPDATE chats SET platform_chat_id = 'group:' || platform_chat_id "
        "WHERE platform = 'http' AND chat_type = 'group' AND "
        + _FITS.format(column="platform_chat_id")
    )


def downgrade() -> None:
    groups = (
        "SELECT platform_chat_id FROM chats WHERE platform = 'http' AND chat_type = 'group' "
        "AND platform_chat_id LIKE 'group:%'"
    )
    for table in ("chat_settings", "usage", "tool_calls"):
        op.execute(
            f"UPDATE {table} SET chat_id = substr(chat_id, 7) "
            f"WHERE platform = 'http' AND chat_id IN ({groups})"
        )
    for table in ("intake", "reminders"):
        op.execute(
            f"UPDATE {table} SET chat_id = substr(chat_id, 7) WHERE platform = 'http' "
            "AND chat_type = 'group' AND chat_id LIKE 'group:%'"
        )
    op.execute(
        "UPDATE chats SET platform_chat_id = substr(platform_chat_id, 7) "
        "WHERE platform = 'http' AND chat_type = 'group' AND platform_chat_id LIKE 'group:%'"
    )
    op.drop_table("chat_owners")
