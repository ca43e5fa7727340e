"""`[Remember: fact]` and `[Forget: text]`: the model's notes about the current sender.

The owner of a memory is always the turn's sender, taken from the ToolContext the
processor builds from the platform event; nothing in the marker text can name another
person, so a group member cannot make the bot write into someone else's memory.
"""

from __future__ import annotations

import logging

from core.tools.registry import Observation, Tool, ToolContext

log = logging.getLogger(__name__)

MAX_MEMORY_CHARS = 500
MAX_MEMORIES_PER_USER = 200
MODEL_AUTHOR = "model"
_MAX_LISTED = 5


def _normal(text: str) -> str:
    return " ".join(text.split())


def remember_tool(
    *,
    enabled: bool = True,
    max_chars: int = MAX_MEMORY_CHARS,
    max_per_user: int = MAX_MEMORIES_PER_USER,
) -> Tool:
    """Store a long-term memory for the sender: deduplicated, length- and count-capped."""

    async def handle(arg: str, ctx: ToolContext) -> Observation:
        if ctx.memory is None:
            return Observation("Long-term memory is not available; nothing was stored.", ok=False)
        fact = _normal(arg)
        if not fact:
            return Observation("Nothing to remember: the text was empty.", ok=False)
        if len(fact) > max_chars:
            return Observation(
                f"Not stored: {len(fact)} characters is over the limit of {max_chars}. "
                "Keep memories short.",
                ok=False,
            )
        existing = await ctx.memory.list_memories(ctx.platform, ctx.user_id)
        if any(_normal(item.content).casefold() == fact.casefold() for item in existing):
            return Observation(f"Already remembered about {ctx.display_name}; nothing changed.")
        if len(existing) >= max_per_user:
            return Observation(
                f"Not stored: {ctx.display_name} already has {len(existing)} memories, "
                "the limit. Ask them to remove some with /memory.",
                ok=False,
            )
        try:
            item = await ctx.memory.add_memory(ctx.platform, ctx.user_id, fact, author=MODEL_AUTHOR)
        except ValueError as exc:  # the store's own validation, phrased by us
            return Observation(f"Not stored: {exc}.", ok=False)
        if item is None:
            return Observation(f"Already remembered about {ctx.display_name}; nothing changed.")
        log.info("stored memory %s for %s", item.id, ctx.sender_key)
        return Observation(f"Remembered about {ctx.display_name} (memory #{item.id}).")

    return Tool(
        name="remember",
        marker="Remember",
        usage="[Remember: fact] - remember a lasting fact about the person you are talking to.",
        description="Store a short lasting fact about the current user (only them).",
        handler=handle,
        arg_attr="fact",
        arg_description="the fact, one short sentence",
        enabled=enabled,
    )


def forget_tool(*, enabled: bool = True) -> Tool:
    """Remove one of the sender's memories: an exact match, or the only one containing it."""

    async def handle(arg: str, ctx: ToolContext) -> Observation:
        if ctx.memory is None:
            return Observation("Long-term memory is not available; nothing was removed.", ok=False)
        needle = _normal(arg).casefold()
        if not needle:
            return Observation("Nothing to forget: the text was empty.", ok=False)
        items = await ctx.memory.list_memories(ctx.platform, ctx.user_id)
        exact = [i for i in items if _normal(i.content).casefold() == needle]
        matches = exact or [i for i in items if needle in _normal(i.content).casefold()]
        if not matches:
            return Observation(f"No memory about {ctx.display_name} matches that; nothing removed.")
        if len(matches) > 1:
            listed = "; ".join(f"#{i.id}: {i.content}" for i in matches[:_MAX_LISTED])
            return Observation(
                f"{len(matches)} memories match, so none was removed. Be more specific. "
                f"Matches: {listed}",
                ok=False,
            )
        target = matches[0]
        removed = await ctx.memory.delete_memory(ctx.platform, ctx.user_id, target.id)
        if not removed:
            return Observation("That memory was already gone.")
        log.info("removed memory %s for %s", target.id, ctx.sender_key)
        return Observation(f"Forgot: {target.content}")

    return Tool(
        name="forget",
        marker="Forget",
        usage="[Forget: text] - forget a stored fact about the person you are talking to.",
        description="Remove one stored fact about the current user, matched by its text.",
        handler=handle,
        arg_attr="text",
        arg_description="the stored fact, or a distinctive part of it",
        enabled=enabled,
    )
