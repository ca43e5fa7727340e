"""Take the language out of a local e5 vector, so a question finds its answer in the other
language.

Why: multilingual-e5-small (4-bit) puts a large "which language" part in every vector,
so a Chinese question is nearer to any Chinese passage than to the English passage that
answers it. Subtracting each language's mean vector, taken once on parallel sentences
about other things (core/knowledge/language_reference.py), leaves mostly the meaning
(docs/knowledge.md has the recall figures).

A text of both scripts subtracts a blend, in proportion to its CJK characters. There are
only these two means: Japanese and Korean (kana, hangul) count as CJK and get the Chinese
one, every other script the English one (docs/knowledge.md, "Language centering").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.knowledge.segment import cjk_share

MEANS_FILE = Path(__file__).with_name("e5_language_means.json")


@dataclass(frozen=True)
class LanguageMeans:
    cjk: np.ndarray  # (dim,) mean vector of the Chinese reference sentences
    other: np.ndarray  # ... of the same sentences in English

    @classmethod
    def load(cls, path: Path = MEANS_FILE) -> LanguageMeans:
        data = json.loads(path.read_text())
        return cls(np.asarray(data["cjk"], np.float32), np.asarray(data["other"], np.float32))

    def center(self, rows: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Unit rows with each text's language mean subtracted."""
        share = np.array([cjk_share(t) for t in texts], np.float32)[:, None]
        centered = rows - share * self.cjk - (1.0 - share) * self.other
        norms = np.linalg.norm(centered, axis=1, keepdims=True)
        return (centered / np.maximum(norms, 1e-12)).astype(np.float32)

    def save(self, path: Path = MEANS_FILE) -> None:
        rounded = {k: [round(float(x), 6) for x in v] for k, v in vars(self).items()}
        path.write_text(json.dumps(rounded) + "\n")


def measure_means(embed_passages: Callable[[list[str]], np.ndarray]) -> LanguageMeans:
    """The means as the engine gives them now (what the shipped file must match)."""
    from core.knowledge.language_reference import PAIRS

    chinese = embed_passages([zh for zh, _ in PAIRS])
    english = embed_passages([en for _, en in PAIRS])
    return LanguageMeans(chinese.mean(axis=0), english.mean(axis=0))


if __name__ == "__main__":  # python -m core.knowledge.centering: rewrite the shipped means
    from core.knowledge.e5.engine import PassageEngine

    engine = PassageEngine()
    measure_means(engine.passages).save()
    engine.close()
    sys.stdout.write(f"wrote {MEANS_FILE}\n")
