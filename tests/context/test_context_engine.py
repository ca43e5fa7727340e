"""One daemon path: the engine builds in the cache order by default, the seed facades keep
the seeds' order by default, and the daemon's modules never load the facades."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.context import ContextBuilder, ContextEngine
from core.context.history_views import HistoryItem
from core.context.parts import SystemComponent, memory_component, session_component
from core.context.turn import TurnInput
from core.messages import ChatType, InboundMessage
from core.text.tokens import TokenCounter, count_messages, get_counter
from core.workspace.files import ensure_workspace
from memory.memories.types import MemoryItem
from memory.turns.types import Turn

ROOT = Path(__file__).resolve().parents[2]
CLOCK = datetime(2025, 3, 2, 6, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter("o200k_base")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    ensure_workspace(root, "Mochi")
    return root


def history(counter: TokenCounter) -> list[HistoryItem]:
    texts = ["[Ann]: hi", "Hello Ann.", "[Ann]: weather?", "Sunny."]
    return [
        HistoryItem(i + 1, "user" if i % 2 == 0 else "assistant", t, counter.count(t))
        for i, t in enumerate(texts)
    ]


def parts() -> list[SystemComponent]:
    session = session_component(sender_name="Ann", sender_id="u1", platform="qq", chat_id="g1")
    return [session, memory_component("Ann", ["likes tea"])]


def test_engine_defaults_to_the_cache_order_and_the_facade_to_the_seeds(
    workspace: Path, counter: TokenCounter
) -> None:
    engine = ContextEngine(workspace, token_counter=counter, clock=lambda: CLOCK)
    facade = ContextBuilder(workspace, token_counter=counter, clock=lambda: CLOCK)
    items, text = history(counter), "[Ann]: and tomorrow?"

    built = engine.build(items, text, components=parts())
    cache = built.messages
    roles = ["system", "user", "assistant", "user", "assistant", "system", "user"]
    assert [m["role"] for m in cache] == roles
    assert "likes tea" in cache[-2]["content"] and "likes tea" not in cache[0]["content"]
    assert built.report.total_tokens == count_messages(cache, counter)

    seed = facade.build(items, text, components=parts()).messages
    assert [m["role"] for m in seed] == ["system", *roles[1:5], "user"]
    assert "likes tea" in seed[0]["content"]

    # Either order is an explicit option of the other class, built by the same code.
    assert engine.build(items, text, components=parts(), layout="seed").messages == seed
    assert facade.build(items, text, components=parts(), layout="cache").messages == cache


def test_build_turn_is_the_engines_through_either_class(
    workspace: Path, counter: TokenCounter
) -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)
    stored = [
        Turn(1, "qq", "g1", "user", "message", "[Ann]: hi", 0, "u1", "Ann", None, {}, now),
        Turn(2, "qq", "g1", "assistant", "message", "Hello.", 0, None, None, None, {}, now),
    ]
    stored = [replace(t, token_count=counter.count(t.content)) for t in stored]
    turn = TurnInput(
        message=InboundMessage("qq", "g1", ChatType.GROUP, "u1", "Ann", "tea?"),
        user_content="[Ann]: tea?",
        user_tokens=counter.count("[Ann]: tea?"),
        history=stored,
        memories=[MemoryItem(1, "qq", "u1", "likes tea", "qq:u1", now)],
    )
    engine = ContextEngine(workspace, token_counter=counter, clock=lambda: CLOCK)
    facade = ContextBuilder(workspace, token_counter=counter, clock=lambda: CLOCK)
    built = engine.build_turn(turn)
    assert [m["role"] for m in built.messages] == ["system", "user", "assistant", "system", "user"]
    assert facade.build_turn(turn).messages == built.messages
    assert (
        facade.build_turn(turn, layout="seed").messages
        == engine.build_turn(turn, layout="seed").messages
    )


def test_the_engine_has_no_seed_methods() -> None:
    """The seed-shaped methods live on the facade only, so the daemon cannot come to
    depend on them."""
    for name in ("build_system_prompt", "build_messages", "add_assistant_message"):
        assert hasattr(ContextBuilder, name) and not hasattr(ContextEngine, name)


def test_the_daemons_modules_never_load_the_seed_facades() -> None:
    """A fresh interpreter: the wiring, the processor and the engine they build with load
    nothing of core/context/seed/."""
    probe = (
        "import sys, bot.wiring.app, core.turn.processor, core.context\n"
        "core.context.ContextEngine\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('core.context.seed'))\n"
        "print(loaded)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
