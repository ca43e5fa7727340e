"""Cached prompt tokens on the usage rows: what the provider billed as prompt-cache hits.

Why: providers bill a request's prefix that repeats the previous request at a fraction of
the price and report how many prompt tokens that was; `/usage`, `chatterd usage` and the
console show it and the hit rate. Existing rows start at 0 (nothing was recorded).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "usage",
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("usage") as batch:
        batch.drop_column("cached_tokens")
