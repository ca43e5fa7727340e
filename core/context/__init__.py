"""The context engine: exactly what the model sees on each turn, within a token budget.

Public API: `ContextEngine` (the daemon's path: a turn in, messages and the typed
`ContextReport` out in a `BuiltContext`) with its `SystemPrompt`, `ContextAssembler`
(Loom's prioritised system prompt), the token counters; and the seed-shaped facades
(core/context/seed/): `ContextBuilder` (nanobot's) and `ChunkContextBuilder` (team9's
XML-tagged chunks). Names load on first use, so `core.text.tokens` alone stays a light
import (no model client, no network stack).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ComponentPriority": "core.context.assembler",
    "ContextAssembler": "core.context.assembler",
    "ContextOverflowError": "core.context.assembler",
    "ContextBuilder": "core.context.seed.builder",
    "ContextEngine": "core.context.engine",
    "BuiltContext": "core.context.report",
    "ContextReport": "core.context.report",
    "SystemPrompt": "core.context.system_prompt",
    "XmlChunkRenderer": "core.context.chunk_render",
    "Chunk": "core.context.chunk_types",
    "ChunkType": "core.context.chunk_types",
    "ContextBuildResult": "core.context.chunk_types",
    "ChunkContextBuilder": "core.context.seed.chunks",
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
    "ContextEngine",
    "ContextOverflowError",
    "ContextReport",
    "SystemPrompt",
    "TokenCounter",
    "XmlChunkRenderer",
    "get_counter",
]

if TYPE_CHECKING:
    from core.context.assembler import ComponentPriority, ContextAssembler, ContextOverflowError
    from core.context.chunk_render import XmlChunkRenderer
    from core.context.chunk_types import Chunk, ChunkType, ContextBuildResult
    from core.context.engine import ContextEngine
    from core.context.report import BuiltContext, ContextReport
    from core.context.seed.builder import ContextBuilder
    from core.context.seed.chunks import ChunkContextBuilder
    from core.context.system_prompt import SystemPrompt
    from core.text.tokens import TokenCounter, get_counter


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'core.context' has no attribute {name!r}")
    return getattr(import_module(module), name)
