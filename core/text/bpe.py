"""The exact token counters: OpenAI's o200k_base and cl100k_base BPEs, loaded offline.

Why this module exists: budgets must rest on the model's own tokenizer, on a machine with
no internet. `tiktoken.get_encoding` downloads its rank file on first use, so we never
call it. Two public interfaces count exactly without a download:

- `tiktoken.Encoding(...)` built from the rank files bpe-openai ships, checked against the
  sha256 that tiktoken pins (the reference implementation, and the default): only the
  configured encoding is loaded, and once its Rust core holds the ranks the Python copy
  is let go, so o200k costs about 55 MiB resident;
- `bpe_openai.get_encoding(name)`: bpe-openai's tiktoken-compatible `Encoding` over its
  Rust tokenizer (about 1.25x faster on chat text, but its import parses every encoding
  it ships: about 135 MiB resident); the fallback, or `backend="bpe_openai"`.

Both count with `encode_ordinary`: special-token text typed by a user is plain text, as
the API treats it.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import warnings
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any


class TokenizerUnavailable(RuntimeError):
    """The requested exact tokenizer cannot be loaded on this machine (never downloaded)."""


# Pretokenizer patterns and special tokens of the two encodings, as published by
# OpenAI in tiktoken_ext/openai_public.py; the sha256 values are the hashes tiktoken pins
# for the decompressed rank files. tests/context/test_tokens.py checks all of this against
# tiktoken's own registry.
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
    r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
ENCODINGS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "o200k_base": MappingProxyType(
            {
                "pat_str": _O200K_PAT,
                "special_tokens": MappingProxyType(
                    {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
                ),
                "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            }
        ),
        "cl100k_base": MappingProxyType(
            {
                "pat_str": _CL100K_PAT,
                "special_tokens": MappingProxyType(
                    {
                        "<|endoftext|>": 100257,
                        "<|fim_prefix|>": 100258,
                        "<|fim_middle|>": 100259,
                        "<|fim_suffix|>": 100260,
                        "<|endofprompt|>": 100276,
                    }
                ),
                "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            }
        ),
    }
)


def _known(encoding: str) -> str:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; known: {sorted(ENCODINGS)}")
    return encoding


class BpeOpenAICounter:
    """Exact counts from bpe-openai's public `Encoding` (its Rust tokenizer).

    Measured on this project's 2-core machine: about 1.25x faster than tiktoken on
    chat-sized text and 3-15x faster on pathological runs (100k identical characters).
    bpe-openai refuses texts of a million characters or 200,000 tokens and more; those
    few are counted by tiktoken, which has no such limit, so every count stays exact.
    """

    exact = True
    pretokenized = True
    backend = "bpe_openai"

    def __init__(self, encoding: str) -> None:
        self.name = _known(encoding)
        self._encoding = _load_bpe_openai(encoding)

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"count() needs str, not {type(text).__name__}")
        try:
            return len(self._encoding.encode_ordinary(text))
        except ValueError:  # bpe-openai's TokenLimitError, or its "input too long"
            return TiktokenCounter(self.name).count(text)

    def __repr__(self) -> str:
        return f"BpeOpenAICounter({self.name!r})"


class TiktokenCounter:
    """Exact counts from tiktoken, built from the rank files bpe-openai ships (no download)."""

    exact = True
    pretokenized = True
    backend = "tiktoken"

    def __init__(self, encoding: str) -> None:
        self.name = _known(encoding)
        self.encoding = _load_tiktoken(encoding)

    def count(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"count() needs str, not {type(text).__name__}")
        return len(self.encoding.encode_ordinary(text))

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"


@cache
def _load_bpe_openai(encoding: str) -> Any:
    """bpe-openai's `Encoding`, once per process (its import parses its rank files: ~0.5 s)."""
    try:
        with warnings.catch_warnings():
            # bpe-openai 0.1 opens its data with importlib.resources.open_binary, which
            # Python 3.11 marks deprecated; the read is correct, the warning not ours.
            warnings.simplefilter("ignore", DeprecationWarning)
            import bpe_openai

            return bpe_openai.get_encoding(encoding)
    except ImportError as exc:
        raise TokenizerUnavailable(f"bpe-openai is not installed: {exc}") from exc
    except Exception as exc:  # the package's own error types, or missing data files
        raise TokenizerUnavailable(f"bpe-openai cannot load {encoding}: {exc}") from exc


def shipped_rank_file(encoding: str) -> Path:
    """Path of the gzipped rank file bpe-openai ships for `encoding` (package data).

    Found without importing the package, whose import parses every rank file it has.
    """
    try:
        spec = importlib.util.find_spec("bpe_openai")
    except (ImportError, ValueError) as exc:
        raise TokenizerUnavailable(f"bpe-openai is not installed: {exc}") from exc
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerUnavailable("bpe-openai is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    path = folder / "data" / f"{encoding}.tiktoken.gz"
    if not path.is_file():
        raise TokenizerUnavailable(f"no shipped rank file for {encoding} at {path}")
    return path


def _load_mergeable_ranks(encoding: str) -> dict[bytes, int]:
    """The encoding's BPE ranks from bpe-openai's shipped rank file, checked by sha256.

    Not cached: 200,000 Python bytes->int entries are about 30 MiB, needed only while
    tiktoken builds its core."""
    spec = ENCODINGS[_known(encoding)]
    try:
        data = gzip.decompress(shipped_rank_file(encoding).read_bytes())
    except (OSError, EOFError) as exc:
        raise TokenizerUnavailable(f"cannot read the rank file for {encoding}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec["sha256"]:
        raise TokenizerUnavailable(
            f"rank file for {encoding} has sha256 {digest}, expected {spec['sha256']}"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@cache
def _load_tiktoken(encoding: str) -> Any:
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenizerUnavailable(f"tiktoken is not installed: {exc}") from exc
    spec = ENCODINGS[encoding]
    built = tiktoken.Encoding(
        encoding,
        pat_str=spec["pat_str"],
        mergeable_ranks=_load_mergeable_ranks(encoding),
        special_tokens=dict(spec["special_tokens"]),
    )
    # tiktoken keeps the Python ranks only to pickle the Encoding; counting runs in its
    # Rust core, which has its own copy. Letting them go saves about 30 MiB resident.
    if isinstance(getattr(built, "_mergeable_ranks", None), dict):
        built._mergeable_ranks = {}
    return built


__all__ = [
    "ENCODINGS",
    "BpeOpenAICounter",
    "TiktokenCounter",
    "TokenizerUnavailable",
    "shipped_rank_file",
]
