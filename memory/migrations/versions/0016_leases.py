"""Leases: a chat's turn order and a reminder's send held across replicas as rows.

Why rows instead of PostgreSQL advisory locks: a session lock needs a connection held for
as long as the turn waits for the model, so a replica's connections grew with its turns
in flight, and PgBouncer in transaction mode cannot carry session state at all. The
intake row's `owner` names the replica that accepted it, so recovery leaves a message
queued on a live replica alone.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )
    op.add_column("intake", sa.Column("owner", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("intake") as batch:
        batch.drop_column("owner")
    op.drop_table("leases")
