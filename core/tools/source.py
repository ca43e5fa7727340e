"""The seam for tools that come and go at run time (MCP servers), offered per sender.

The registry's tools are fixed for the daemon's life; a ToolSource's are not, and who
may use each one depends on who is asking. The loop asks the source for this sender's
offer before the model call and routes the calls it owns to it; the source decides
permission again when a call runs and bounds every call with its own timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from core.tools.registry import Observation, ToolCall, ToolContext


class SourceOffer(Protocol):
    @property
    def names(self) -> frozenset[str]: ...

    dropped: tuple[str, ...]
    tokens: int

    def functions(self) -> list[dict[str, Any]]: ...

    def guide_lines(self, *, native: bool) -> list[str]: ...


class ToolSource(Protocol):
    def offer(self, ctx: ToolContext, *, native: bool) -> SourceOffer: ...

    def owns(self, name: str) -> bool: ...

    async def run(self, call: ToolCall, ctx: ToolContext) -> Observation: ...

    def frame(
        self, call: ToolCall, observation: Observation, defuse: Callable[[str], str]
    ) -> str: ...
