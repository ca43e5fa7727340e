"""The child process that embeds passages: `python -m core.knowledge.e5.worker WEIGHTS WORKERS`.

Why a child: the encoder is fastest with one thread per core, each making single-threaded
BLAS calls, but BLAS's thread count belongs to the whole process. Here the parent sets it
to one through the environment before numpy loads (`engine.child_env`), so the daemon's
own matrix products keep every BLAS thread while an ingest runs.

Protocol (stdin -> stdout): first the child answers one JSON line, `{"ready": {"dim": n}}`
or `{"error": "one line"}` (then it exits). Each request is one JSON line, `{"texts":
[...], "prefix": "passage: "}`; the answer is a JSON line `{"rows": n, "dim": d}` and
n * d little-endian float32, or `{"error": "one line"}`. It exits when stdin closes.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import IO, Any

from core.knowledge.e5.forward import Encoder
from core.knowledge.e5.weights import PortError, Weights


def serve(encoder: Encoder, requests: IO[bytes], answers: IO[bytes]) -> None:
    """Answer requests until `requests` ends."""
    for line in requests:
        try:
            request = json.loads(line)
            texts = [str(t) for t in request["texts"]]
            rows = encoder.embed(texts, str(request["prefix"]))
        except (ValueError, KeyError, TypeError) as exc:
            _send(answers, {"error": f"a bad request ({type(exc).__name__})"})
            continue
        _send(answers, {"rows": rows.shape[0], "dim": rows.shape[1]})
        answers.write(rows.astype("<f4").tobytes())
        answers.flush()
        _give_back_memory()


def _send(answers: IO[bytes], message: dict[str, Any]) -> None:
    answers.write(json.dumps(message).encode() + b"\n")
    answers.flush()


def _give_back_memory() -> None:
    """glibc keeps the worker threads' freed batch buffers in its arenas;
    hand them back to the system. Elsewhere there is no malloc_trim and nothing to do."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def main() -> None:
    path, workers = Path(sys.argv[1]), int(sys.argv[2])
    answers = sys.stdout.buffer
    try:
        weights = Weights.load(path)
    except PortError as exc:
        _send(answers, {"error": str(exc)})
        sys.exit(1)
    except OSError as exc:
        _send(answers, {"error": f"cannot read {path}: {exc.strerror}"})
        sys.exit(1)
    _send(answers, {"ready": {"dim": weights.shape.hidden}})
    serve(Encoder(weights, workers=workers), sys.stdin.buffer, answers)


if __name__ == "__main__":
    main()
