"""Exact nearest passages in memory: one float32 matrix per scope, one matrix product.

Why not a scan of the table: reading every vector from the database for each question is
slow; a matrix built once per scope answers with one product.
Why a fingerprint: another replica (or the re-embedder) may change a scope; every search
compares the scope's cheap fingerprint (ready documents: count, id sum, latest update)
with the one the matrix was built at, and reloads only a scope that changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class VectorSource(Protocol):
    async def fingerprint(self, scopes: Sequence[str]) -> dict[str, tuple[int, int, str]]: ...

    async def load_vectors(self, scope: str, model: str) -> tuple[list[int], list[bytes]]: ...


@dataclass(frozen=True)
class _Matrix:
    ids: np.ndarray  # int64 chunk ids
    rows: np.ndarray  # (n, dim) float32, unit rows
    fingerprint: tuple[int, int, str] | None


class VectorIndex:
    """Per-scope matrices of one model's vectors, loaded on demand, kept fresh."""

    def __init__(self, source: VectorSource, model: str) -> None:
        self._source = source
        self._model = model
        self._scopes: dict[str, _Matrix] = {}
        self._lock = asyncio.Lock()

    @property
    def model(self) -> str:
        return self._model

    def forget(self, scope: str | None = None) -> None:
        """Drop a scope's matrix (or all): the next search reloads it."""
        if scope is None:
            self._scopes.clear()
        else:
            self._scopes.pop(scope, None)

    async def _fresh(self, scopes: Sequence[str]) -> list[_Matrix]:
        async with self._lock:
            prints = await self._source.fingerprint(scopes)
            out: list[_Matrix] = []
            for scope in scopes:
                now = prints.get(scope)
                have = self._scopes.get(scope)
                if have is None or have.fingerprint != now:
                    have = await self._load(scope, now)
                    self._scopes[scope] = have
                out.append(have)
            return out

    async def _load(self, scope: str, fingerprint: tuple[int, int, str] | None) -> _Matrix:
        ids, blobs = await self._source.load_vectors(scope, self._model)
        if not ids:
            return _Matrix(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), fingerprint)
        rows = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(ids), -1)
        return _Matrix(np.asarray(ids, dtype=np.int64), rows, fingerprint)

    async def search(
        self, scopes: Sequence[str], query: np.ndarray, limit: int
    ) -> list[tuple[int, float]]:
        """The `limit` chunk ids of these scopes nearest to `query`, with cosines."""
        found_ids: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        for matrix in await self._fresh(scopes):
            if not len(matrix.ids) or matrix.rows.shape[1] != query.shape[0]:
                continue
            scores = matrix.rows @ query
            if len(scores) > limit:
                top = np.argpartition(-scores, limit)[:limit]
                found_ids.append(matrix.ids[top])
                found_scores.append(scores[top])
            else:
                found_ids.append(matrix.ids)
                found_scores.append(scores)
        if not found_ids:
            return []
        ids = np.concatenate(found_ids)
        scores = np.concatenate(found_scores)
        order = np.argsort(-scores, kind="stable")[:limit]
        return [(int(ids[i]), float(scores[i])) for i in order]
