"""Reciprocal rank fusion: one ranking from a keyword ranking and a vector ranking.

Why ranks and not scores: bm25 and cosine are on different scales that move with the
corpus; 1 / (k + rank) needs no tuning and rewards what both lists agree on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RRF_K = 60


@dataclass(frozen=True)
class Fused:
    chunk_id: int
    score: float
    keyword_rank: int | None  # 1-based; None: not among the keyword hits
    vector_rank: int | None
    keyword_score: float | None
    vector_score: float | None


def fuse(
    keyword: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]], limit: int
) -> list[Fused]:
    """The best `limit` chunks of both rankings (each best first), fused by RRF."""
    kw = {cid: (rank, score) for rank, (cid, score) in enumerate(keyword, start=1)}
    vec = {cid: (rank, score) for rank, (cid, score) in enumerate(vector, start=1)}
    fused: list[Fused] = []
    for cid in dict.fromkeys([c for c, _ in keyword] + [c for c, _ in vector]):
        k, v = kw.get(cid), vec.get(cid)
        score = (1 / (RRF_K + k[0]) if k else 0.0) + (1 / (RRF_K + v[0]) if v else 0.0)
        fused.append(
            Fused(
                cid,
                score,
                k[0] if k else None,
                v[0] if v else None,
                k[1] if k else None,
                v[1] if v else None,
            )
        )
    fused.sort(key=lambda f: (-f.score, f.chunk_id))
    return fused[:limit]
