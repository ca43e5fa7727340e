"""Token counting for every engine: choosing a counter, and what a message costs.

Counts are exact (the model's own tokenizer, `core.text.bpe`) and work offline; where no
exact tokenizer loads, a CJK-aware estimate says so (`exact=False`). The chat-format
arithmetic lives here too, so every caller counts a request the same way.
"""

from __future__ import annotations

import json
import logging
import math
import string
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, Protocol, runtime_checkable

from core.text.bpe import ENCODINGS, BpeOpenAICounter, TiktokenCounter, TokenizerUnavailable

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "o200k_base"
ESTIMATE = "estimate"

# Chat-format overhead, as OpenAI documents it for gpt-3.5-turbo-0613 and later (gpt-4,
# gpt-4o, o-series): every message is framed as <|start|>{role/name}\n{content}<|end|>,
# which costs 3 tokens beyond the counted role and content; a `name` field costs 1 more;
# every reply is primed with <|start|>assistant<|message|>, 3 tokens.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMER_TOKENS = 3

# Image parts are priced by OpenAI's tile rule: 85 base tokens plus 170 per 512 px tile
# after scaling. We cannot see the pixel size of a data URL cheaply, so an image part
# costs a 1024x1024 image at detail "high"/"auto" (85 + 4 * 170 = 765) -- an upper bound
# for typical chat photos, which are scaled to fit 2048 and then to 768 px on the short
# side. detail="low" is a flat 85.
IMAGE_TOKENS = 765
IMAGE_TOKENS_LOW = 85

# Model-name prefixes -> encoding (longest-specific first: "gpt-4o" before "gpt-4").
_MODEL_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)

Backend = Literal["auto", "bpe_openai", "tiktoken"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of plain text. `exact` says whether the count is the model tokenizer's.

    Counters may also set `pretokenized = True`: a regex-pretokenizing BPE (the o200k /
    cl100k family), whose pieces never cross a boundary the pattern forces. The assembler
    and chunk builder then sum counts of parts instead of recounting whole prompts.
    """

    name: str
    exact: bool

    def count(self, text: str) -> int: ...


class EstimateCounter:
    """A CJK-aware estimate for when no tokenizer can be loaded; `exact` is False.

    Linear and C-speed (str.translate and codec lengths, no regex): ASCII letters 1 token
    per 4, digits 1 per 2, punctuation 1 each, whitespace 0.3;
    2-byte characters (Cyrillic, Greek, Arabic, accented Latin) 0.5; 3-byte characters
    (CJK, kana, Hangul, Thai) 1.1; 4-byte characters (emoji) 2; and never less than 1.1 per
    whitespace-separated word. Measured against o200k and
    cl100k it is 0.86-2.2x the real count on chat text (0.67x at worst on adversarial
    fragments): it leans high so budgets computed with it are rarely overrun.
    """

    exact = False
    pretokenized = False
    backend = ESTIMATE

    def __init__(self, name: str = ESTIMATE) -> None:
        self.name = name

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"count() needs str, not {type(text).__name__}")
        if not text:
            return 0
        chars = len(text)
        n_ascii = len(text.encode("ascii", "ignore"))
        punct = chars - len(text.translate(_DROP_PUNCT))
        digits = chars - len(text.translate(_DROP_DIGITS))
        spaces = chars - len(text.translate(_DROP_SPACE))
        letters = n_ascii - punct - digits - spaces
        by_class = letters / 4 + digits / 2 + punct + spaces * 0.3
        if n_ascii < chars:
            n_bytes = len(text.encode("utf-8", "surrogatepass"))
            astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - chars
            rest = chars - n_ascii - astral
            three = (n_bytes - n_ascii - 4 * astral) - 2 * rest
            by_class += (rest - three) * 0.5 + three * 1.1 + astral * 2.0
        return math.ceil(max(by_class, len(text.split()) * 1.1))

    def __repr__(self) -> str:
        return f"EstimateCounter({self.name!r})"


_DROP_PUNCT = MappingProxyType(str.maketrans("", "", string.punctuation))
_DROP_DIGITS = MappingProxyType(str.maketrans("", "", string.digits))
_DROP_SPACE = MappingProxyType(str.maketrans("", "", " \t\r\n\x0b\x0c"))


def resolve_encoding(name: str | None) -> str:
    """Map a tokenizer setting (encoding name, OpenAI model name, or "estimate") to a name.

    Unknown names are an error, not a silent estimate: a typo in `context.tokenizer`
    must not quietly turn exact budgets into guesses.
    """
    if name is None:
        return DEFAULT_ENCODING
    if not isinstance(name, str):
        raise TypeError(f"tokenizer name must be str, not {type(name).__name__}")
    key = name.strip().lower()
    if key in ENCODINGS or key == ESTIMATE:
        return key
    for prefix, encoding in _MODEL_PREFIXES:
        if key.startswith(prefix):
            return encoding
    raise ValueError(
        f"unknown tokenizer {name!r}: use one of {sorted(ENCODINGS)}, {ESTIMATE!r}, "
        "or an OpenAI model name (gpt-4o, gpt-4.1, gpt-4, gpt-3.5-turbo, o3, ...)"
    )


def get_counter(name: str | None = None, *, backend: Backend = "auto") -> TokenCounter:
    """Return a token counter for an encoding or model name (default o200k_base).

    backend="auto" tries tiktoken built from the rank files bpe-openai ships (the leaner
    in memory, see `core.text.bpe`), then bpe-openai's public `Encoding`, then falls
    back to `EstimateCounter` with a warning. Naming a backend makes it mandatory
    (TokenizerUnavailable if it cannot load). Nothing is downloaded.
    """
    encoding = resolve_encoding(name)
    if encoding == ESTIMATE:
        return EstimateCounter()
    if backend not in ("auto", "bpe_openai", "tiktoken"):
        raise ValueError(f"unknown backend {backend!r}: auto, bpe_openai or tiktoken")
    order: tuple[type[BpeOpenAICounter] | type[TiktokenCounter], ...]
    if backend == "bpe_openai":
        order = (BpeOpenAICounter,)
    elif backend == "tiktoken":
        order = (TiktokenCounter,)
    else:
        order = (TiktokenCounter, BpeOpenAICounter)
    problems: list[str] = []
    for cls in order:
        try:
            return cls(encoding)
        except TokenizerUnavailable as exc:
            problems.append(str(exc))
    if backend != "auto":
        raise TokenizerUnavailable("; ".join(problems))
    log.warning(
        "no exact tokenizer for %s (%s); token counts are estimates",
        encoding,
        "; ".join(problems),
    )
    return EstimateCounter()


def _part_tokens(part: Any, counter: TokenCounter) -> int:
    if isinstance(part, str):
        return counter.count(part)
    if not isinstance(part, Mapping):
        raise TypeError(f"content part must be a dict or str, not {type(part).__name__}")
    kind = part.get("type")
    if kind == "text":
        return counter.count(str(part.get("text", "")))
    if kind in ("image_url", "image", "input_image"):
        image = part.get("image_url")
        detail = image.get("detail") if isinstance(image, Mapping) else part.get("detail")
        return IMAGE_TOKENS_LOW if detail == "low" else IMAGE_TOKENS
    # Unknown part kinds (audio, files): count their JSON, an upper bound for text-ish ones.
    return counter.count(json.dumps(part, ensure_ascii=False, default=str))


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens one chat message adds: framing + every field, as OpenAI's cookbook counts.

    String fields (role, content, name, tool_call_id) are tokenized; list content is
    summed by part; `tool_calls` are counted as their JSON (no published exact rule).
    """
    if not isinstance(message, Mapping):
        raise TypeError(f"message must be a dict, not {type(message).__name__}")
    total = TOKENS_PER_MESSAGE
    for key, value in message.items():
        if value is None:
            continue
        if key == "content" and not isinstance(value, str):
            if isinstance(value, Iterable):
                total += sum(_part_tokens(part, counter) for part in value)
                continue
            raise TypeError(f"message content must be str or a list of parts, not {value!r}")
        if key == "tool_calls":
            total += counter.count(json.dumps(value, ensure_ascii=False, default=str))
            continue
        if isinstance(value, str):
            total += counter.count(value)
        else:
            total += counter.count(json.dumps(value, ensure_ascii=False, default=str))
        if key == "name":
            total += TOKENS_PER_NAME
    return total


def count_messages(
    messages: Iterable[Mapping[str, Any]], counter: TokenCounter | None = None
) -> int:
    """Prompt tokens of an OpenAI chat request: all messages plus the reply primer."""
    counter = counter if counter is not None else get_counter()
    return REPLY_PRIMER_TOKENS + sum(message_tokens(m, counter) for m in messages)


__all__ = [
    "DEFAULT_ENCODING",
    "ESTIMATE",
    "IMAGE_TOKENS",
    "IMAGE_TOKENS_LOW",
    "REPLY_PRIMER_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "EstimateCounter",
    "TokenCounter",
    "count_messages",
    "get_counter",
    "message_tokens",
    "resolve_encoding",
]
