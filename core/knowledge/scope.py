"""Whose documents a search or an add is about: one chat's or every chat's.

Apart from service.py, which brings numpy: scopes are named at start, long before
anything needs the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.knowledge.types import GLOBAL_SCOPE


@dataclass(frozen=True)
class Scope:
    """Whose documents: one chat's ("telegram:-100123") or every chat's ("global")."""

    key: str

    @classmethod
    def chat(cls, platform: str, chat_id: str) -> Scope:
        return cls(f"{platform}:{chat_id}")

    @classmethod
    def everyone(cls) -> Scope:
        return cls(GLOBAL_SCOPE)

    @property
    def is_global(self) -> bool:
        return self.key == GLOBAL_SCOPE
