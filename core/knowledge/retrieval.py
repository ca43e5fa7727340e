"""A turn's passages from the knowledge base, as the context engine takes them.

The turn path only knows `KnowledgeLookup`; which documents a chat may see, how many
passages and their budget are the knowledge base's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.context.report import KnowledgeNote
from core.knowledge.citations import Citations
from core.knowledge.render import numbered_passages
from core.media.shared import Defuse, neutralise, one_line

if TYPE_CHECKING:
    from core.knowledge.service import Hit


def note_for(
    hits: Sequence[Hit],
    max_tokens: int,
    defuse: Defuse | None = None,
    citations: Citations | None = None,
) -> KnowledgeNote:
    """The rendered passages within `max_tokens`, with what was shown and what was not,
    and the number each shown passage has (the turn's numbering starts from them)."""
    numbering = citations if citations is not None else Citations()
    text, shown = numbered_passages(hits, max_tokens, defuse, citations=numbering)
    labels = [hit.label for hit in hits]
    numbers = tuple((hit.chunk_id, numbering.cite(hit.chunk_id)) for hit in hits[:shown])
    return KnowledgeNote(text, tuple(labels[:shown]), tuple(labels[shown:]), numbers)


def hits_text(hits: Sequence[Hit], defuse: Defuse | None = None) -> str:
    """`/kb search`'s and the tool's view: number, fused score, both ranks, source, text."""

    lines: list[str] = []
    for number, hit in enumerate(hits, start=1):
        why = [f"score {hit.score:.4f}"]
        if hit.keyword_rank is not None:
            why.append(f"keyword #{hit.keyword_rank}")
        if hit.vector_rank is not None:
            similarity = f" ({hit.vector_score:.2f})" if hit.vector_score is not None else ""
            why.append(f"meaning #{hit.vector_rank}{similarity}")
        head = f"[{number}] #{hit.document_id} {one_line(hit.label, 120)} — {', '.join(why)}"
        lines.append(f"{head}\n{one_line(neutralise(hit.text, defuse), 300)}")
    return "\n".join(lines)
