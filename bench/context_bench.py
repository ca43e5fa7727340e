"""The context engine against two references, in one process, on one seeded workload.

What is measured (see bench/RESULTS.md, section "Context engine"):

- ours, incremental: the daemon's steady state. One `ContextBuilder` kept across turns
  (system prompt token counts cached), history passed as stored turns
  (`memory.turns.types.Turn`, each with its stored `token_count`), and per build only new
  material tokenized: a fresh ~3k-token search result (four variants, rotated, so it is
  never the one cached from the previous build) and the current message.
- ours, cold: a fresh `ContextBuilder` (nothing cached, workspace files read from disk)
  and history as OpenAI message dicts with no stored counts, so kept turns are tokenized.
- reference `trim_messages`: `langchain_core.messages.trim_messages(strategy="last",
  include_system=True)` with a token counter built on the same exact counter and the same
  per-message overhead (`core.text.tokens.message_tokens`), given LangChain messages built
  beforehand (their native input), system prompt = our full unconstrained prompt.
- reference `len//4`: a Loom-style assembler that estimates every message as
  `len(text) // 4` and keeps the newest messages whose estimates fit.

Every output is counted exactly with `core.text.tokens.count_messages` against the same
prompt budget (8k / 32k / 128k tokens, reply primer included). Speed is reported as ratios against
`trim_messages` run in the same process on the same inputs; peak memory is measured in a
separate untimed run with tracemalloc.

Run: .venv/bin/python bench/context_bench.py [--quick] [--no-write]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    trim_messages,
)

from bench.results import cpu_model, load_average, write_section  # noqa: E402
from core.context import ContextBuilder  # noqa: E402
from core.context.parts import (  # noqa: E402
    SystemComponent,
    memory_component,
    retrieved_component,
    session_component,
)
from core.context.turn import TurnInput  # noqa: E402
from core.messages import ChatType, InboundMessage  # noqa: E402
from core.text.tokens import (  # noqa: E402
    REPLY_PRIMER_TOKENS,
    TokenCounter,
    count_messages,
    get_counter,
    message_tokens,
)
from memory.memories.types import MemoryItem  # noqa: E402
from memory.turns.types import Turn  # noqa: E402

SEED = 20250302
SIZES = (100, 1_000, 10_000, 100_000)
BUDGETS = (8_192, 32_768, 131_072)  # prompt budgets "8k", "32k", "128k" (reply primer included)
REPLY_TOKENS = 1_024  # ContextBuilder's reply reserve: its window is budget + this
SEARCH_VARIANTS = 4
CLOCK = datetime(2025, 3, 2, 6, 5, tzinfo=UTC)
MIB = 1024 * 1024
# Targets (from the issue).
TARGET_MS = 3.0
TARGET_SPEEDUP = 400.0
TARGET_FLAT = 1.5
TARGET_PEAK = MIB
HEADLINE = (10_000, 131_072)

OURS, COLD, TRIM, NAIVE = "ours", "ours-cold", "trim_messages", "len//4"
ENGINES = (OURS, COLD, TRIM, NAIVE)
LABELS = {
    OURS: "ours, incremental (stored counts, warm builder)",
    COLD: "ours, cold (fresh builder, no stored counts)",
    TRIM: "reference: langchain_core trim_messages",
    NAIVE: "reference: len(text)//4 assembler",
}

# A tiny PNG; image parts are priced by our counter at 765 tokens each (IMAGE_TOKENS).
PNG_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAAAAgABVK"
    "JPXQAAAABJRU5ErkJggg=="
)

# -- the workload -----------------------------------------------------------------------

ZH_WORDS = (
    "今天 天气 很好 我们 一起 去 公园 散步 吧 你 觉得 怎么样 明天 下午 开会 记得 带 电脑 "
    "这个 问题 有点 复杂 需要 再 想想 晚饭 吃 什么 火锅 还是 烧烤 最近 工作 太忙 了 周末 "
    "休息 一下 电影 好看 推荐 一本 书 给 我 学习 编程 真的 不 容易 但是 很 有意思 谢谢 "
    "大家 帮忙 没问题 随时 联系 地铁 站 出口 见 价格 便宜 质量 不错 快递 已经 到 了 "
    "老师 说 作业 下周 交 考试 准备 得 如何 机器人 回答 准确 吗 上海 北京 深圳 广州 "
    "咖啡 奶茶 蛋糕 手机 没电 充电器 借 我 用 一下 好的 收到 哈哈 真的 假的"
).split()
ZH_PUNCT = ("，", "。", "？", "！", "、", "：")
EN_WORDS = (
    "the a to and of in is it you that for on was with as have be at this are not "
    "but what all were when we there can an your which their said if do will each about "
    "how up out them then she many some so these would other into has more her two like "
    "him see time could no make than first been its who now people my made over did down "
    "only way find use may water long little very after words called just where most know "
    "weather meeting tomorrow deploy server bug fix release coffee lunch train ticket "
    "python rust database migration token budget context window model prompt search "
    "results memory cache latency throughput benchmark weekend movie dinner thanks sure"
).split()
EN_PUNCT = (",", ".", "?", "!", ":", ";")
NICKS = ("Ann", "小明", "bob_42", "李雷", "Mochi fan", "韩梅梅", "Zed", "kitty🐱", "老王", "Eve")
IMAGE_NOTES = (
    "a cat sleeping on a keyboard",
    "一张地铁线路图的截图",
    "a receipt from a coffee shop, total 32 yuan",
    "a whiteboard with a sequence diagram",
)


def _corpus(rng: random.Random, kind: str, chars: int) -> str:
    """A long seeded text in one language mix; turns are random slices of it."""
    parts: list[str] = []
    size = 0
    while size < chars:
        use_zh = kind == "zh" or (kind == "mixed" and rng.random() < 0.5)
        run = rng.randint(3, 9) if kind == "mixed" else rng.randint(6, 16)
        if use_zh:
            text = "".join(rng.choice(ZH_WORDS) for _ in range(run)) + rng.choice(ZH_PUNCT)
        else:
            words = [rng.choice(EN_WORDS) for _ in range(run)]
            text = " ".join(words) + rng.choice(EN_PUNCT) + " "
            if kind == "mixed":
                text = " " + text
        parts.append(text)
        size += len(text)
    return "".join(parts)


@dataclass
class Workload:
    """Every engine's input, built once before anything is timed (inputs are not timed)."""

    turns: list[Turn]  # stored turns, oldest first, each with its stored token_count
    dicts: list[dict[str, Any]]  # the same history as OpenAI message dicts, no counts
    lc: list[BaseMessage]  # the same history as LangChain messages
    persona: str
    tool_guide: str
    memories: list[str]
    searches: list[str]  # SEARCH_VARIANTS different search results, ~3k tokens each
    current_text: str
    image_parts: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)


def _take(rng: random.Random, corpus: str, length: int) -> str:
    start = rng.randrange(0, len(corpus) - length - 1)
    return corpus[start : start + length].strip() or corpus[:length]


def _text_of_tokens(rng: random.Random, corpus: str, tokens: int, counter: TokenCounter) -> str:
    """Seeded lines of text totalling about `tokens` tokens."""
    lines: list[str] = []
    total = 0
    while total < tokens:
        line = "- " + _take(rng, corpus, rng.randint(60, 160))
        lines.append(line)
        total += counter.count(line) + 1
    return "\n".join(lines)


def make_workload(n_turns: int, counter: TokenCounter) -> Workload:
    rng = random.Random(SEED)
    corpora = {kind: _corpus(rng, kind, 400_000) for kind in ("zh", "en", "mixed")}
    kinds = ("zh", "en", "mixed")
    weights = (45, 40, 15)
    turns: list[Turn] = []
    dicts: list[dict[str, Any]] = []
    lc: list[BaseMessage] = []
    mix = {"zh": 0, "en": 0, "mixed": 0}
    notes = 0
    for i in range(1, n_turns + 1):
        kind = rng.choices(kinds, weights)[0]
        mix[kind] += 1
        length = rng.randint(20, 400)
        user = rng.random() < 0.6
        if user:
            prefix = f"[{rng.choice(NICKS)}]: "
            note = ""
            if rng.random() < 0.02:
                note = f"\n(Image 1: {rng.choice(IMAGE_NOTES)})"
                notes += 1
            body = _take(rng, corpora[kind], max(1, length - len(prefix) - len(note)))
            text = prefix + body + note
            role = "user"
        else:
            text = _take(rng, corpora[kind], length)
            role = "assistant"
        turns.append(
            Turn(
                id=i,
                platform="qq",
                chat_id="5566",
                role=role,  # type: ignore[arg-type]
                kind="message",
                content=text,
                token_count=counter.count(text),  # what storage keeps with every turn
                sender_id=None,
                sender_name=None,
                platform_message_id=None,
                meta={},
                created_at=CLOCK,
            )
        )
        dicts.append({"role": role, "content": text})
        lc.append(HumanMessage(content=text) if user else AIMessage(content=text))
    persona = (
        "You are Mochi, a warm and precise assistant in a busy QQ group. "
        "Reply in the language of the person who wrote.\n"
        + _text_of_tokens(rng, corpora["mixed"], 2_000, counter)
    )
    tool_guide = (
        "Write [Search: keywords] on its own line to search the web; you will get the results "
        "as untrusted material. Write [Remember: fact] to store a fact about the sender.\n"
        + _text_of_tokens(rng, corpora["en"], 700, counter)
    )
    memories = [_take(rng, corpora[rng.choice(kinds)], rng.randint(40, 100)) for _ in range(30)]
    searches = []
    for v in range(SEARCH_VARIANTS):
        items = []
        total = 0
        k = 0
        while total < 3_000:
            k += 1
            title = _take(rng, corpora[rng.choice(kinds)], rng.randint(15, 40))
            snippet = _take(rng, corpora[rng.choice(kinds)], rng.randint(150, 320))
            item = f"{k}. {title}\n   https://example.com/{v}/{k}\n   {snippet}"
            items.append(item)
            total += counter.count(item) + 1
        searches.append("\n".join(items))
    current = "[Ann]: " + _take(rng, corpora["mixed"], 160) + " 这两张图里是什么？"
    images = [{"type": "image_url", "image_url": {"url": PNG_URL}} for _ in range(2)]
    stats = {
        "mix": {k: v / n_turns for k, v in mix.items()},
        "image_notes": notes,
        "chars_mean": statistics.fmean(len(d["content"]) for d in dicts),
        "tokens_mean": statistics.fmean(t.token_count for t in turns),
    }
    return Workload(
        turns, dicts, lc, persona, tool_guide, memories, searches, current, images, stats
    )


# -- the engines ------------------------------------------------------------------------


def make_workspace(root: Path, persona: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "SOUL.md").write_text(persona + "\n", encoding="utf-8")
    return root


def turn_components(w: Workload, variant: int) -> list[SystemComponent]:
    """This turn's system material: session rules, the sender's memory, the search result."""
    return [
        session_component(
            sender_name="Ann", sender_id="1001", platform="qq", chat_id="5566", chat_type="group"
        ),
        memory_component("Ann", w.memories),
        retrieved_component(w.searches[variant]),
    ]


def new_builder(workspace: Path, budget: int, counter: TokenCounter, w: Workload) -> ContextBuilder:
    """A builder whose prompt budget (window - reply reserve) is exactly `budget`."""
    return ContextBuilder(
        workspace,
        max_tokens=budget + REPLY_TOKENS,
        reply_tokens=REPLY_TOKENS,
        token_counter=counter,
        bot_name="Mochi",
        timezone="Asia/Shanghai",
        clock=lambda: CLOCK,
        tool_guide=w.tool_guide,
    )


_LC_ROLE = {"system": "system", "human": "user", "ai": "assistant"}


def lc_to_dict(message: BaseMessage) -> dict[str, Any]:
    return {"role": _LC_ROLE[message.type], "content": message.content}


def lc_counter(counter: TokenCounter) -> Callable[[list[BaseMessage]], int]:
    """trim_messages' token counter: our exact counter, our per-message overhead."""

    def count(messages: list[BaseMessage]) -> int:
        return sum(message_tokens(lc_to_dict(m), counter) for m in messages)

    return count


def naive_len4(
    system: str, history: Sequence[dict[str, Any]], current: dict[str, Any], budget: int
) -> list[dict[str, Any]]:
    """Loom-style: estimate each message as len(text)//4, keep the newest that fit."""

    def estimate(message: dict[str, Any]) -> int:
        content = message["content"]
        if isinstance(content, str):
            return len(content) // 4
        size = 0
        for part in content:
            size += len(part.get("text") or part.get("image_url", {}).get("url", ""))
        return size // 4

    used = len(system) // 4 + estimate(current)
    kept: list[dict[str, Any]] = []
    for message in reversed(history):
        cost = len(message["content"]) // 4
        if used + cost > budget:
            break
        used += cost
        kept.append(message)
    kept.reverse()
    return [{"role": "system", "content": system}, *kept, current]


class CountingCounter:
    """Wraps a counter; counts calls, and calls on history texts (recognised by identity)."""

    def __init__(self, inner: TokenCounter, history_texts: Sequence[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.exact = inner.exact
        self.pretokenized = getattr(inner, "pretokenized", False)
        self._history = {id(t) for t in history_texts}
        self.calls = 0
        self.chars = 0
        self.history_calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        if id(text) in self._history:
            self.history_calls += 1
        return self.inner.count(text)


# -- measuring --------------------------------------------------------------------------


@dataclass
class Cell:
    engine: str
    turns: int
    budget: int
    times: list[float] = field(default_factory=list)  # seconds
    produced: int = 0  # exact count_messages of the output (search variant 0)
    worst: int = 0  # the largest output of all the builds timed (ours: 4 search variants)
    kept: int = 0  # history turns kept
    current: str = "kept"  # what became of the current message: kept / cut / dropped
    peak: int = 0  # bytes, tracemalloc peak during one build
    history_tokenized: int = -1  # history texts tokenized by one build (counting wrapper)
    tokenizer_calls: int = -1
    tokenizer_chars: int = -1
    new_chars: int = -1  # characters of new material in one incremental build

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def over(self) -> int:
        return max(0, max(self.produced, self.worst) - self.budget)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter_ns()
    out = fn()
    return (time.perf_counter_ns() - start) / 1e9, out


def peak_of(fn: Callable[[], Any]) -> int:
    """tracemalloc peak of one call, beyond what was allocated before it (the inputs)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
        del out
    finally:
        tracemalloc.stop()
    return peak


def repeats_for(engine: str, turns: int, quick: bool) -> int:
    if engine == TRIM:
        if turns >= 100_000:
            return 1 if quick else 3
        if turns >= 10_000:
            return 3 if quick else 5
        return 5 if quick else 15
    if engine == COLD:
        return 5 if quick else 20
    return 20 if quick else 100


class Bench:
    def __init__(self, w: Workload, counter: TokenCounter, workspace: Path, quick: bool) -> None:
        self.w = w
        self.counter = counter
        self.workspace = workspace
        self.quick = quick
        self.cells: dict[tuple[str, int, int], Cell] = {}
        self.systems: dict[int, str] = {}  # search variant -> full system prompt
        self.builders: dict[int, ContextBuilder] = {}  # budget -> the warm builder
        self.current_dict: dict[str, Any] = {
            "role": "user",
            "content": [*w.image_parts, {"type": "text", "text": w.current_text}],
        }

    def reference_system(self, variant: int) -> str:
        """Our system prompt with nothing cut: what the references are given."""
        if variant not in self.systems:
            big = new_builder(self.workspace, 1_000_000, self.counter, self.w)
            # The seed layout: every part in the one system message (the cache layout's
            # first message would leave out the time, session, memory and search result).
            built = big.build([], "x", components=turn_components(self.w, variant))
            self.systems[variant] = built.messages[0]["content"]
        return self.systems[variant]

    def verify(self, cell: Cell, built: Any) -> None:
        """Our report's total must be the exact count of what we send."""
        exact = count_messages(built.messages, self.counter)
        if exact != built.report.total_tokens:
            raise AssertionError(f"{cell.engine}: report {built.report.total_tokens} != {exact}")

    def ours(self, cell: Cell, turns: list[Turn], reps: int) -> None:
        w = self.w
        builder = self.builders.get(cell.budget)
        if builder is None:
            builder = self.builders[cell.budget] = new_builder(
                self.workspace, cell.budget, self.counter, w
            )
        comps = [turn_components(w, v) for v in range(SEARCH_VARIANTS)]
        state = {"i": 0}

        def run() -> Any:
            state["i"] += 1
            parts = comps[state["i"] % SEARCH_VARIANTS]
            return builder.build(
                turns, w.current_text, images=w.image_parts, components=parts, layout="cache"
            )

        for _ in range(2 * SEARCH_VARIANTS):  # warm: every variant seen, then replaced
            run()
        last: dict[int, Any] = {}
        totals = []
        for _ in range(reps):  # back to back; outputs are checked after the clock stops
            seconds, built = timed(run)
            cell.times.append(seconds)
            totals.append(built.report.total_tokens)
            last[state["i"] % SEARCH_VARIANTS] = built
        for built in last.values():
            self.verify(cell, built)
        cell.produced = last[0].report.total_tokens
        cell.worst = max(totals)
        cell.kept = built.report.history_kept
        cell.current = "cut" if built.report.current_truncated else "kept"
        # What one warm build tokenizes: a twin builder with a counting wrapper.
        counting = CountingCounter(self.counter, [t.content for t in turns])
        twin = new_builder(self.workspace, cell.budget, counting, w)  # type: ignore[arg-type]
        for v in range(SEARCH_VARIANTS + 1):
            twin.build(
                turns, w.current_text, images=w.image_parts, components=comps[v % 4], layout="cache"
            )
        counting.calls = counting.chars = counting.history_calls = 0
        twin.build(turns, w.current_text, images=w.image_parts, components=comps[1], layout="cache")
        cell.history_tokenized = counting.history_calls
        cell.tokenizer_calls, cell.tokenizer_chars = counting.calls, counting.chars
        cell.new_chars = len(comps[1][2].content) + len(w.current_text)
        cell.peak = peak_of(run)

    def cold(self, cell: Cell, dicts: list[dict[str, Any]], reps: int) -> None:
        w = self.w
        parts = turn_components(w, 0)

        def fresh(counter: TokenCounter) -> Callable[[], Any]:
            builder = new_builder(self.workspace, cell.budget, counter, w)  # not timed
            return lambda: builder.build(
                dicts, w.current_text, images=w.image_parts, components=parts, layout="cache"
            )

        for _ in range(reps):
            seconds, built = timed(fresh(self.counter))
            cell.times.append(seconds)
        self.verify(cell, built)
        cell.produced = built.report.total_tokens
        cell.kept = built.report.history_kept
        cell.current = "cut" if built.report.current_truncated else "kept"
        counting = CountingCounter(self.counter, [d["content"] for d in dicts])
        built = fresh(counting)()  # type: ignore[arg-type]
        if built.report.history_tokenized != counting.history_calls:
            raise AssertionError("report.history_tokenized disagrees with the counting wrapper")
        cell.history_tokenized = counting.history_calls
        cell.tokenizer_calls, cell.tokenizer_chars = counting.calls, counting.chars
        cell.peak = peak_of(fresh(self.counter))

    def trim(self, cell: Cell, lc: list[BaseMessage], reps: int) -> None:
        current = HumanMessage(content=self.current_dict["content"])
        messages = [SystemMessage(content=self.reference_system(0)), *lc, current]
        count = lc_counter(self.counter)

        def run() -> Any:
            return trim_messages(
                messages,
                max_tokens=cell.budget - REPLY_PRIMER_TOKENS,  # the counter omits the primer
                token_counter=count,
                strategy="last",
                include_system=True,
            )

        for _ in range(reps):
            seconds, out = timed(run)
            cell.times.append(seconds)
        has_current = bool(out) and out[-1] is current
        has_system = bool(out) and isinstance(out[0], SystemMessage)
        cell.produced = count_messages([lc_to_dict(m) for m in out], self.counter)
        cell.kept = len(out) - int(has_system) - int(has_current)
        cell.current = "kept" if has_current else "dropped"
        cell.peak = peak_of(run)

    def naive(self, cell: Cell, dicts: list[dict[str, Any]], reps: int) -> None:
        system = self.reference_system(0)

        def run() -> Any:
            return naive_len4(system, dicts, self.current_dict, cell.budget)

        for _ in range(reps):
            seconds, out = timed(run)
            cell.times.append(seconds)
        cell.produced = count_messages(out, self.counter)
        cell.kept = len(out) - 2
        cell.peak = peak_of(run)

    def run_cell(self, engine: str, n: int, budget: int) -> Cell:
        cell = Cell(engine, n, budget)
        w = self.w
        reps = repeats_for(engine, n, self.quick)
        gc.collect()
        if engine == OURS:
            self.ours(cell, w.turns[-n:], reps)
        elif engine == COLD:
            self.cold(cell, w.dicts[-n:], reps)
        elif engine == TRIM:
            self.trim(cell, w.lc[-n:], reps)
        else:
            self.naive(cell, w.dicts[-n:], reps)
        self.cells[(engine, n, budget)] = cell
        return cell

    def run_all(self) -> None:
        for budget in BUDGETS:
            for n in SIZES:
                for engine in ENGINES:
                    started = time.perf_counter()
                    cell = self.run_cell(engine, n, budget)
                    print(
                        f"  {budget // 1024:>3}k {n:>7,} {engine:<14} median "
                        f"{cell.median * 1e3:9.3f} ms x{len(cell.times):<3} "
                        f"tokens {cell.produced:>7,}/{cell.budget:<7,} kept {cell.kept:>6,} "
                        f"peak {cell.peak / 1024:8.1f} KiB "
                        f"({time.perf_counter() - started:.1f} s)",
                        flush=True,
                    )

    def seam_build_turn(self) -> tuple[float, int]:
        """The processor's seam, `build_turn(TurnInput)`, at the headline size (no search)."""
        n, budget = HEADLINE
        w = self.w
        builder = new_builder(self.workspace, budget, self.counter, w)
        message = InboundMessage(
            "qq", "5566", ChatType.GROUP, "1001", "Ann", w.current_text, timestamp=CLOCK
        )
        turn = TurnInput(
            message=message,
            user_content=w.current_text,
            user_tokens=self.counter.count(w.current_text),
            history=w.turns[-n:],
            memories=[
                MemoryItem(i, "qq", "1001", m, "qq:1001", CLOCK) for i, m in enumerate(w.memories)
            ],
            image_parts=tuple(w.image_parts),
            tool_guide=w.tool_guide,
        )
        for _ in range(5):
            builder.build_turn(turn)
        times = []
        for _ in range(repeats_for(OURS, n, self.quick)):
            seconds, built = timed(lambda: builder.build_turn(turn))
            times.append(seconds)
        if built.report.total_tokens != count_messages(built.messages, self.counter):
            raise AssertionError("build_turn report total is not the exact count")
        return statistics.median(times), built.report.history_kept


# -- reporting --------------------------------------------------------------------------


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:,.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_ratio(value: float) -> str:
    return f"{value:,.0f}x" if value >= 10 else f"{value:.2f}x"


def k(budget: int) -> str:
    return f"{budget // 1024}k"


def render(bench: Bench, command: str, elapsed: float, seam: tuple[float, int], load: str) -> str:
    cells = bench.cells
    w = bench.w
    c = bench.counter
    comps = turn_components(w, 0)
    persona_t = c.count(w.persona)
    session_t = c.count(comps[0].content)
    memory_t = c.count(comps[1].content)
    tool_t = c.count(w.tool_guide)
    search_t = statistics.fmean(c.count(s) for s in w.searches)
    system_full = count_messages([{"role": "system", "content": bench.reference_system(0)}], c)
    mix = w.stats["mix"]
    quick = bench.quick
    lines = [
        "## Context engine (bench/context_bench.py)",
        "",
        f"Command: `{command}`{' (quick mode: fewer repeats)' if quick else ''}  ",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
        f"{platform.machine()}, Python {platform.python_version()}, langchain-core "
        f"{_version('langchain-core')}, bpe-openai {_version('bpe-openai')}; tokenizer "
        f"`{c.name}` ({type(c).__name__}); run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{elapsed:.0f} s in all; load average (1 min) {load}.",
        "",
        f"**Workload** (seed {SEED}): {max(SIZES):,} stored turns; the histories are its "
        f"newest 100 / 1,000 / 10,000 / 100,000. {mix['zh']:.0%} Chinese, {mix['en']:.0%} "
        f"English, {mix['mixed']:.0%} mixed, 20–400 characters (mean "
        f"{w.stats['chars_mean']:.0f} characters, {w.stats['tokens_mean']:.0f} tokens); "
        f"user turns (60%) start with `[nick]: `, {w.stats['image_notes']:,} carry an "
        f"`(Image 1: …)` note. System components: persona (SOUL.md) {persona_t:,}, session "
        f"rules {session_t:,}, sender memory {memory_t:,}, tool guide {tool_t:,}, search "
        f"results {search_t:,.0f} tokens (4 variants); with identity, time and headers the "
        f"whole system message is {system_full:,} tokens. The current message carries 2 image "
        "parts (765 tokens each). The budget is the prompt's (reply primer included; "
        f"ContextBuilder gets a window of budget + {REPLY_TOKENS:,} reply tokens); every "
        "output is counted exactly with `count_messages`.",
        "",
        "**Engines.** *ours*: `ContextBuilder.build` kept across builds, history as stored "
        "`Turn`s with `token_count`, a new search result in every build (rotated among 4, so "
        "it is always re-tokenized) and the current message counted in the build. *ours-cold*: "
        "a fresh builder per build (workspace read from disk), history as message dicts "
        'without counts. *trim_messages*: `trim_messages(strategy="last", '
        "include_system=True)`, token counter = our `message_tokens` (same counter, same "
        "per-message overhead), given prebuilt LangChain messages and our whole system "
        "prompt. *len//4*: a Loom-style assembler; every message is estimated as "
        "`len(text)//4`, the newest that fit are kept. *Tokens out* is with search result 0 "
        "for every engine; ours' over-budget check covers every build it timed.",
        "",
        f"Times are medians of back-to-back calls: ours {repeats_for(OURS, 1, quick)}, cold "
        f"{repeats_for(COLD, 1, quick)}, len//4 {repeats_for(NAIVE, 1, quick)}, "
        f"trim_messages {repeats_for(TRIM, 1_000, quick)} up to 1,000 turns, "
        f"{repeats_for(TRIM, 10_000, quick)} at 10,000 and {repeats_for(TRIM, 100_000, quick)} "
        "at 100,000 (one call takes seconds there). *vs trim* = trim_messages' median / this "
        "engine's, same cell, same process. Peak = tracemalloc peak of one call beyond its "
        "inputs (a separate, untimed call).",
        "",
    ]
    lines += _targets(bench)
    for budget in BUDGETS:
        lines += [
            "",
            f"### Budget {k(budget)} ({budget:,} tokens)",
            "",
            "| turns | engine | median ms | vs trim | tokens out | over budget | turns kept "
            "| current msg | peak KiB |",
            "|---:|---|---:|---:|---:|---:|---:|---|---:|",
        ]
        for n in SIZES:
            ref = cells[(TRIM, n, budget)].median
            for engine in ENGINES:
                cell = cells[(engine, n, budget)]
                over = f"**+{cell.over:,}** (+{cell.over / budget:.0%})" if cell.over else "0"
                current = cell.current if cell.current != "dropped" else "**dropped**"
                lines.append(
                    f"| {n:,} | {engine} | {fmt_ms(cell.median)} | "
                    f"{fmt_ratio(ref / cell.median)} | {cell.produced:,} | {over} | "
                    f"{cell.kept:,} | {current} | {cell.peak / 1024:,.0f} |"
                )
    lines += [
        "",
        "### Tokenizer work per build",
        "",
        "A counting wrapper around the counter; *history* = calls on history texts, *new* = "
        "characters of this build's new material (search result + current message). More "
        "characters tokenized than *new* means material tokenized more than once in a build: "
        "where the search result must be cut to fit (8k), every probe of the cut is counted."
        + _double_count_note(cells),
        "",
        "| budget | turns | ours: calls | ours: chars tokenized / new | ours: history "
        "| cold: calls | cold: history / kept |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for budget in BUDGETS:
        for n in SIZES:
            o, cold = cells[(OURS, n, budget)], cells[(COLD, n, budget)]
            lines.append(
                f"| {k(budget)} | {n:,} | {o.tokenizer_calls} | {o.tokenizer_chars:,} / "
                f"{o.new_chars:,} | {o.history_tokenized} | {cold.tokenizer_calls:,} | "
                f"{cold.history_tokenized:,} / {cold.kept:,} |"
            )
    lines += [
        "",
        "The processor's own seam, `build_turn(TurnInput)` (stored turns, sender memory, tool "
        f"guide, no search result), at {HEADLINE[0]:,} turns / {k(HEADLINE[1])}: median "
        f"{fmt_ms(seam[0])} ms, {seam[1]:,} turns kept.",
    ]
    return "\n".join(lines) + "\n"


def _double_count_note(cells: dict[tuple[str, int, int], Cell]) -> str:
    """Say so when an uncut new search result is tokenized about twice (observed, not assumed)."""
    cell = cells[(OURS, HEADLINE[0], HEADLINE[1])]
    if cell.tokenizer_chars < 1.8 * cell.new_chars:
        return ""
    return (
        f" At {k(HEADLINE[1])} nothing is cut, yet {cell.tokenizer_chars:,} characters are "
        f"tokenized for {cell.new_chars:,} new ones: the search result, the prompt's last "
        "section, is counted twice (with and without its section separator, in "
        "core/context/assembler.py)."
    )


def _targets(bench: Bench) -> list[str]:
    cells = bench.cells
    n, budget = HEADLINE
    head = cells[(OURS, n, budget)]
    trim = cells[(TRIM, n, budget)]
    speedup = trim.median / head.median
    small = cells[(OURS, 1_000, budget)]
    big = cells[(OURS, 100_000, budget)]
    flat = big.median / small.median
    colds = [c for c in cells.values() if c.engine == COLD]
    cold_ok = all(c.history_tokenized <= c.kept + 1 for c in colds)
    cold_worst = max(c.history_tokenized - c.kept for c in colds)
    ours_over = [c for c in cells.values() if c.engine in (OURS, COLD) and c.over]
    ours_total = sum(1 for c in cells.values() if c.engine in (OURS, COLD))
    naive = [c for c in cells.values() if c.engine == NAIVE]
    naive_over = [c for c in naive if c.over]
    worst = max(naive, key=lambda c: c.over / c.budget)
    trims = [c for c in cells.values() if c.engine == TRIM]
    trim_over = [c for c in trims if c.over]
    trim_dropped = [c for c in trims if c.current == "dropped"]
    peaks = [cells[(OURS, 100_000, b)].peak for b in BUDGETS]
    cold_peak = max(cells[(COLD, 100_000, b)].peak for b in BUDGETS)
    trim_peak = max(cells[(TRIM, 100_000, b)].peak for b in BUDGETS)

    def verdict(ok: bool) -> str:
        return "**PASS**" if ok else "**FAIL**"

    naive_txt = (
        f"len//4: over in {len(naive_over)}/{len(naive)} cells, worst +{worst.over:,} tokens "
        f"(+{worst.over / worst.budget:.0%}) at {worst.turns:,} turns / {k(worst.budget)}"
    )
    trim_txt = f"trim_messages: over in {len(trim_over)}/{len(trims)}" + (
        f", current message dropped in {len(trim_dropped)}" if trim_dropped else ""
    )
    return [
        "### Targets",
        "",
        "| target | measured | result |",
        "|---|---|---|",
        f"| ours, incremental, {n:,} turns / {k(budget)} / 3k-token search result: median "
        f"≤ {TARGET_MS:g} ms | {fmt_ms(head.median)} ms ({head.kept:,} turns kept) | "
        f"{verdict(head.median * 1e3 <= TARGET_MS)} |",
        f"| same cell: ≥ {TARGET_SPEEDUP:g}x faster than trim_messages | "
        f"{fmt_ratio(speedup)} (trim_messages {fmt_ms(trim.median)} ms) | "
        f"{verdict(speedup >= TARGET_SPEEDUP)} |",
        f"| ours at 100,000 turns ≤ {TARGET_FLAT:g}x ours at 1,000 ({k(budget)}) | "
        f"{flat:.2f}x ({fmt_ms(big.median)} vs {fmt_ms(small.median)} ms; {big.kept:,} vs "
        f"{small.kept:,} turns kept) | {verdict(flat <= TARGET_FLAT)} |",
        f"| cold build tokenizes only the kept turns + at most one (all {len(colds)} cells) | "
        f"worst: kept + {cold_worst} | {verdict(cold_ok)} |",
        f"| 0 cells over budget (ours and ours-cold) | {len(ours_over)}/{ours_total} over. "
        f"{naive_txt}; {trim_txt} | {verdict(not ours_over)} |",
        f"| ours: peak extra memory at 100,000 turns < 1 MiB | "
        f"{' / '.join(f'{p / 1024:,.0f}' for p in peaks)} KiB at "
        f"{' / '.join(k(b) for b in BUDGETS)} (ours-cold {cold_peak / 1024:,.0f} KiB, "
        f"trim_messages {trim_peak / MIB:,.1f} MiB) | {verdict(max(peaks) < TARGET_PEAK)} |",
    ]


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    command = ".venv/bin/python bench/context_bench.py" + "".join(
        f" {a}" for a in (sys.argv[1:] if argv is None else argv)
    )
    started = time.perf_counter()
    load_before = load_average()
    counter = get_counter("o200k_base")
    print(f"tokenizer {counter!r}; building the workload ...", flush=True)
    workload = make_workload(max(SIZES), counter)
    print(f"  done in {time.perf_counter() - started:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = make_workspace(Path(tmp) / "workspace", workload.persona)
        bench = Bench(workload, counter, workspace, args.quick)
        bench.run_all()
        seam = bench.seam_build_turn()
        load = f"{load_before} at start, {load_average()} at the end"
        text = render(bench, command, time.perf_counter() - started, seam, load)
    print()
    print(text)
    if not args.no_write:
        write_section("context-bench", text)
        print("wrote bench/RESULTS.md (context engine section)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
