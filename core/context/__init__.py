"""The context engine: exactly what the model sees on each turn, within a token budget.

Public API: `ContextBuilder` (nanobot's facade) with its `SystemPrompt` and the typed
`ContextReport` it returns in a `BuiltContext`, `ContextAssembler` (Loom's prioritised
system prompt), `ChunkContextBuilder` (team9's XML-tagged chunks), the token counters.
Names load on first use, so a caller that needs one name (the token counters live in
core/text/) does not load the others (no model client, no network stack).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ComponentPriority": "core.context.assembler",
    "ContextAssembler": "core.context.assembler",
    "ContextOverflowError": "core.context.assembler",
    "ContextBuilder": "core.context.builder",
    "BuiltContext": "core.context.report",
    "ContextReport": "core.context.report",
    "SystemPrompt": "core.context.system_prompt",
    "XmlChunkRenderer": "core.context.chunk_render",
    "Chunk": "core.context.chunk_types",
    "ChunkType": "core.context.chunk_types",
    "ContextBuildResult": "core.context.chunk_types",
    "ChunkContextBuilder": "core.context.chunks",
    "TokenCounter": "core.text.tokens",
    "get_counter": "core.text.tokens",
}
__all__ = [
    "BuiltContext",
    "Chunk",
    "ChunkContextBuilder",
    "ChunkType",
    "ComponentPriority",
    "ContextAssembler",
    "ContextBuildResult",
    "ContextBuilder",
    "ContextOverflowError",
    "ContextReport",
    "SystemPrompt",
    "TokenCounter",
    "XmlChunkRenderer",
    "get_counter",
]

if TYPE_CHECKING:
    from core.context.assembler import ComponentPriority, ContextAssembler, ContextOverflowError
    from core.context.builder import ContextBuilder
    from core.context.chunk_render import XmlChunkRenderer
    from core.context.chunk_types import Chunk, ChunkType, ContextBuildResult
    from core.context.chunks import ChunkContextBuilder
    from core.context.report import BuiltContext, ContextReport
    from core.context.system_prompt import SystemPrompt
    from core.text.tokens import TokenCounter, get_counter


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'core.context' has no attribute {name!r}")
    return getattr(import_module(module), name)
