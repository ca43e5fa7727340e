"""`[Remember: fact]` and `[Forget: text]`: the model's notes about the current sender.

The owner of a memory is always the turn's sender, taken from the ToolContext the
processor builds from the platform event; nothing in the marker text can name another
person, so a group member cannot make the bot write into someone else's memory. What
may be stored (length, count, duplicates) is memory.memories.service's rule, the same as for
`/memory` and `chatterd memory`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from core.tools.registry import Observation, Tool, ToolContext, ToolHandler
from core.tools.words import worded_tool
from memory.memories.service import MemoryRefused, MemoryService

MODEL_AUTHOR = "model"
_MAX_LISTED = 5

# What a memory tool does with the sender's memory service and the marker's argument.
MemoryAct = Callable[[MemoryService, str, ToolContext], Awaitable[Observation]]


def remember_tool(*, enabled: bool = True) -> Tool:
    """Store a long-term memory for the sender, under the memory service's rules."""

    async def remember(service: MemoryService, arg: str, ctx: ToolContext) -> Observation:
        item = await service.add(ctx.platform, ctx.user_id, arg, author=MODEL_AUTHOR)
        if item is None:
            return Observation(f"Already remembered about {ctx.display_name}; nothing changed.")
        return Observation(f"Remembered about {ctx.display_name} (memory #{item.id}).")

    handler = _with_memory(remember, undone="nothing was stored")
    return worded_tool("remember", handler, enabled=enabled)


def forget_tool(*, enabled: bool = True) -> Tool:
    """Remove one of the sender's memories: the same text, or the only one containing it."""

    async def forget(service: MemoryService, arg: str, ctx: ToolContext) -> Observation:
        found = await service.forget_text(ctx.platform, ctx.user_id, arg, by=MODEL_AUTHOR)
        if not found.matches:
            return Observation(f"No memory about {ctx.display_name} matches that; nothing removed.")
        if len(found.matches) > 1:
            listed = "; ".join(f"#{i.id}: {i.content}" for i in found.matches[:_MAX_LISTED])
            return Observation(
                f"{len(found.matches)} memories match, so none was removed. Be more specific. "
                f"Matches: {listed}",
                ok=False,
            )
        if not found.removed:
            return Observation("That memory was already gone.")
        return Observation(f"Forgot: {found.matches[0].content}")

    handler = _with_memory(forget, undone="nothing was removed")
    return worded_tool("forget", handler, enabled=enabled)


def _with_memory(act: MemoryAct, *, undone: str) -> ToolHandler:
    """`act` on the sender's memory service; what both tools answer alike: no memory
    store (`undone` says what did not happen), or the service's refusal as the reason."""

    async def handle(arg: str, ctx: ToolContext) -> Observation:
        if ctx.memory is None:
            return Observation(f"Long-term memory is not available; {undone}.", ok=False)
        try:
            return await act(MemoryService(ctx.memory), arg, ctx)
        except MemoryRefused as refused:
            return Observation(str(refused), ok=False)

    return handle
