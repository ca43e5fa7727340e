"""The built-in tools' words as data (core/tools/words.toml), and the one builder that
puts a tool together from its words and its workings.

Why data: what the model and the person read about a tool is prompt text, read and
tuned side by side; each tool's module keeps only what it does.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType
from typing import Any

from core.tools.registry import Tool, ToolHandler

WORDS_FILE = "words.toml"


def _load_words() -> Mapping[str, Mapping[str, str]]:
    text = files("core.tools").joinpath(WORDS_FILE).read_text(encoding="utf-8")
    return MappingProxyType(
        {name: MappingProxyType(words) for name, words in tomllib.loads(text).items()}
    )


WORDS = _load_words()


def worded_tool(name: str, handler: ToolHandler, **workings: Any) -> Tool:
    """Tool `name` with its words from words.toml; `workings` are the rest of its
    Tool fields (enabled, untrusted_notice, params, offered_to, a usage built in code)."""
    return Tool(name=name, handler=handler, **{**WORDS[name], **workings})
