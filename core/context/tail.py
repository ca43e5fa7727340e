"""Where this turn's own material goes when an endpoint cannot take a late system message.

The builder sends the tail (time, session, the sender's memory, retrieved text) as a
system message right before the current message, so everything before it is an
identical prefix of the next request. Some chat templates move every
system message to the top (which re-bills the whole history each turn) or refuse one
after the first. For those, `[context] turn_material = "user"` sends the tail as a
`<turn_context>` block opening the current user message instead. It stays as trusted as
a system message because nobody else can write that tag: every other user-role text in
the request (history, the current message) has it neutralised (core/text/escaping.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from core.text.escaping import neutralize_tags

TurnMaterial = Literal["system", "user"]

TAG = "turn_context"
_TAGS = frozenset({TAG})
OPEN, CLOSE = f"<{TAG}>\n", f"\n</{TAG}>\n\n"


class _Choice(Protocol):
    """What `turn_material` reads from the settings (bot.config.Settings)."""

    @property
    def context(self) -> Any: ...

    @property
    def llm(self) -> Any: ...


def turn_material(settings: _Choice) -> TurnMaterial:
    """`[context] turn_material` resolved: "auto" is "user" for the embedded model, whose
    server (llama-cpp-python's "chatml" format) keeps only the first system message and
    silently drops later ones, and "system" for any configured endpoint."""
    chosen = settings.context.turn_material
    if chosen == "auto":
        embedded = not (settings.llm.base_url or settings.llm.api_key)
        return "user" if embedded else "system"
    return "user" if chosen == "user" else "system"


def wrapped(tail: str) -> str:
    """The tail as the trusted block that opens the user message."""
    return OPEN + tail + CLOSE


def unforgeable(message: Mapping[str, Any]) -> dict[str, Any]:
    """`message` with anything that reads as a <turn_context> tag made plain text.

    Only user-role and tool text can carry what someone else wrote; the head system
    message and the tail are ours and pass unchanged.
    """
    out = dict(message)
    if out.get("role") == "system":
        return out
    content = out.get("content")
    if isinstance(content, str):
        out["content"] = neutralize_tags(content, _TAGS)
    elif isinstance(content, list):
        out["content"] = [_safe_part(p) for p in content]
    return out


def with_turn_context(message: Mapping[str, Any], tail: str) -> dict[str, Any]:
    """The current user message opened by the tail's block (its own text neutralised)."""
    safe = unforgeable(message)
    content = safe.get("content")
    if isinstance(content, list):
        safe["content"] = [{"type": "text", "text": wrapped(tail).rstrip("\n")}, *content]
    else:
        safe["content"] = wrapped(tail) + (content or "")
    return safe


def _safe_part(part: Any) -> Any:
    if isinstance(part, Mapping) and isinstance(part.get("text"), str):
        return {**part, "text": neutralize_tags(part["text"], _TAGS)}
    return part
