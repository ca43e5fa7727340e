"""Why the knowledge base keeps its vectors in memory: sqlite-vec against the matrix.

The issue asked for sqlite-vec where it loads. The standard library's sqlite3 here cannot
load extensions; apsw can. This measures what that would buy: exact top-50 over 100,000
unit vectors of 384 dimensions, split between one chat's scope and the global one as a
turn searches them. The reference is core/knowledge/vectors.py's kernel (one float32
matrix product, then a partial sort), run in the same process on the same vectors.

    .venv/bin/pip install apsw sqlite-vec   # not dependencies of chatterd
    .venv/bin/python bench/vector_backends.py [--no-write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.results import cpu_model, load_average, write_section  # noqa: E402

COUNT, DIM, TOP, QUERIES = 100_000, 384, 50, 40


def unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    rows = rng.standard_normal((count, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def timed(search: Callable[[np.ndarray], list[int]], queries: np.ndarray) -> tuple[float, float]:
    search(queries[0])
    times = []
    for query in queries:
        started = time.perf_counter()
        search(query)
        times.append(time.perf_counter() - started)
    times.sort()
    return statistics.median(times) * 1000, times[int(len(times) * 0.95)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    import apsw
    import sqlite_vec

    rng = np.random.default_rng(1)
    matrix, queries = unit_rows(rng, COUNT), unit_rows(rng, QUERIES)
    scopes = ["chat" if i % 2 else "*" for i in range(COUNT)]
    with tempfile.TemporaryDirectory() as folder:
        db = apsw.Connection(os.path.join(folder, "vec.db"))
        db.enable_load_extension(True)
        db.load_extension(sqlite_vec.loadable_path())
        db.execute(
            "create virtual table v using vec0(scope text partition key, "
            f"embedding float[{DIM}] distance_metric=cosine)"
        )
        started = time.perf_counter()
        with db:
            db.executemany(
                "insert into v(rowid, scope, embedding) values (?, ?, ?)",
                ((i, scopes[i], matrix[i].tobytes()) for i in range(COUNT)),
            )
        fill_s = time.perf_counter() - started

        def with_sqlite_vec(query: np.ndarray) -> list[int]:
            rows = []
            for scope in ("chat", "*"):
                rows += db.execute(
                    "select rowid, distance from v where embedding match ? and k = ? and scope = ?",
                    (query.tobytes(), TOP, scope),
                ).fetchall()
            return [r[0] for r in sorted(rows, key=lambda r: r[1])[:TOP]]

        def with_matrix(query: np.ndarray) -> list[int]:
            scores = matrix @ query
            top = np.argpartition(-scores, TOP)[:TOP]
            return top[np.argsort(-scores[top])].tolist()

        vec_p50, vec_p95 = timed(with_sqlite_vec, queries)
        mat_p50, mat_p95 = timed(with_matrix, queries)
        same = len(set(with_sqlite_vec(queries[1])) & set(with_matrix(queries[1])))
        size_mb = os.path.getsize(os.path.join(folder, "vec.db")) / 2**20
    text = (
        f"Exact top-{TOP} over {COUNT:,} unit vectors of {DIM} dimensions (half one chat's "
        f"scope, half global; two partitions in sqlite-vec); {cpu_model()}, load average "
        f"{load_average()}. sqlite-vec {sqlite_vec.__version__} through apsw "
        f"(SQLite {apsw.sqlitelibversion()}): p50 {vec_p50:.1f} ms, p95 {vec_p95:.1f} ms "
        f"({fill_s:.1f} s to fill, {size_mb:.0f} MB on disk). The in-memory matrix "
        f"(core/knowledge/vectors.py's kernel), same vectors, same process: p50 "
        f"{mat_p50:.1f} ms, p95 {mat_p95:.1f} ms, so sqlite-vec takes "
        f"{vec_p50 / mat_p50:.1f}x as long. Both return the same {same} of {TOP}.\n"
    )
    print(text)
    if not args.no_write:
        write_section("vector-backends", text)


if __name__ == "__main__":
    main()
