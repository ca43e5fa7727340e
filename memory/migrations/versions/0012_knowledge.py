"""The knowledge base: documents per scope, their passages, their vectors, a word index.

Why the word index differs by backend: SQLite gets an FTS5 table (`knowledge_fts`, the
chunk id as its rowid, the scope unindexed beside the terms) and PostgreSQL a tsvector
column under a GIN index; both index the same pre-segmented terms, so Chinese words are
found on either (core/knowledge/segment.py says why).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

from memory.migrations.columns import BIG_ID

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCOPE = sa.String(161)


def upgrade() -> None:
    op.create_table(
        "knowledge_documents",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("scope", SCOPE, nullable=False),
        sa.Column("source", sa.String(256), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("pages", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("added_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_knowledge_documents"),
        sa.UniqueConstraint(
            "scope", "content_hash", name="uq_knowledge_documents_scope_content_hash"
        ),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_knowledge_documents_scope_state", "knowledge_documents", ["scope", "state"])
    op.create_table(
        "knowledge_chunks",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("document_id", BIG_ID, nullable=False),
        sa.Column("scope", SCOPE, nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("locator", sa.String(256), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
        sa.Column("terms_vector", sa.Text().with_variant(TSVECTOR(), "postgresql"), nullable=True),
        sa.ForeignKeyConstraint(
            ["document_id"],
            ["knowledge_documents.id"],
            name="fk_knowledge_chunks_document_id_knowledge_documents",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_knowledge_chunks"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_knowledge_chunks_document_id", "knowledge_chunks", ["document_id", "ordinal"]
    )
    op.create_index("ix_knowledge_chunks_scope", "knowledge_chunks", ["scope"])
    op.create_index(
        "ix_knowledge_chunks_terms_vector",
        "knowledge_chunks",
        ["terms_vector"],
        postgresql_using="gin",
    )
    op.create_table(
        "knowledge_vectors",
        sa.Column("chunk_id", BIG_ID, nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("scope", SCOPE, nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["chunk_id"],
            ["knowledge_chunks.id"],
            name="fk_knowledge_vectors_chunk_id_knowledge_chunks",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("chunk_id", "model", name="pk_knowledge_vectors"),
    )
    op.create_index("ix_knowledge_vectors_scope_model", "knowledge_vectors", ["scope", "model"])
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE knowledge_fts USING fts5("
            "terms, scope UNINDEXED, tokenize = 'unicode61')"
        )
        # How many passages hold each term: the search skips the commonest query terms.
        op.execute("CREATE VIRTUAL TABLE knowledge_fts_vocab USING fts5vocab(knowledge_fts, 'row')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS knowledge_fts_vocab")
        op.execute("DROP TABLE IF EXISTS knowledge_fts")
    op.drop_index("ix_knowledge_vectors_scope_model", table_name="knowledge_vectors")
    op.drop_table("knowledge_vectors")
    op.drop_index("ix_knowledge_chunks_terms_vector", table_name="knowledge_chunks")
    op.drop_index("ix_knowledge_chunks_scope", table_name="knowledge_chunks")
    op.drop_index("ix_knowledge_chunks_document_id", table_name="knowledge_chunks")
    op.drop_table("knowledge_chunks")
    op.drop_index("ix_knowledge_documents_scope_state", table_name="knowledge_documents")
    op.drop_table("knowledge_documents")
