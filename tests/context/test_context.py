"""ContextBuilder: system prompt, exact budget, history fitting, report, isolation."""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.context import ContextBuilder
from core.context.assembler import ComponentPriority, ContextOverflowError
from core.context.history_views import HistoryItem
from core.context.parts import (
    SystemComponent,
    memory_component,
    retrieved_component,
    session_component,
)
from core.context.report import format_report
from core.context.turn import TurnInput
from core.messages import ChatType, InboundMessage
from core.text.tokens import TokenCounter, count_messages, get_counter
from core.workspace.files import ensure_workspace
from core.workspace.skills import SkillsLoader
from memory.memories.types import MemoryItem
from memory.turns.types import Turn

CLOCK = datetime(2025, 3, 2, 6, 5, tzinfo=UTC)  # a Sunday; 14:05 in Shanghai
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_counter("o200k_base")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    ensure_workspace(root, "Mochi")
    return root


@pytest.fixture
def make(workspace: Path, counter: TokenCounter) -> Callable[..., ContextBuilder]:
    def factory(**kwargs: Any) -> ContextBuilder:
        options: dict[str, Any] = {
            "token_counter": counter,
            "bot_name": "Mochi",
            "timezone": "Asia/Shanghai",
            "clock": lambda: CLOCK,
            "skills": SkillsLoader(workspace / "skills", which=lambda _b: None, environ={}),
        }
        options.update(kwargs)
        return ContextBuilder(workspace, **options)

    return factory


def write_skill(root: Path, name: str, front: str, body: str = "Body.") -> None:
    folder = root / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")


def chat(n: int, counter: TokenCounter, size: int = 12) -> list[HistoryItem]:
    rng = random.Random(n)
    items = []
    for i in range(n):
        text = f"[user{i % 3}]: " + " ".join(
            rng.choice(["hi", "天气", "news", "好的"]) for _ in range(size)
        )
        items.append(
            HistoryItem(i + 1, "user" if i % 2 == 0 else "assistant", text, counter.count(text))
        )
    return items


# -- system prompt -------------------------------------------------------------------------


def test_system_prompt_sections_in_documented_order(
    make: Callable[..., ContextBuilder], workspace: Path
) -> None:
    (workspace / "memory" / "MEMORY.md").write_text("The office closes at 6pm.", encoding="utf-8")
    (workspace / "memory" / "2025-03-02.md").write_text("Today: team lunch.", encoding="utf-8")
    (workspace / "memory" / "2025-03-01.md").write_text("Yesterday's note.", encoding="utf-8")
    (workspace / "USER.md").unlink()
    write_skill(
        workspace, "notes", "name: notes\ndescription: Take notes\nalways: true", "Always note."
    )
    builder = make(tool_guide="Write [Search: words].")
    prompt = builder.build_system_prompt(layout="cache")
    headers = [line[2:] for line in prompt.splitlines() if line.startswith("# ")]
    assert headers == [  # stable first: the time is this turn's own, so it comes last
        "Identity",
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "Tool guide",
        "Skill notes",
        "Workspace memory",
        "Notes for 2025-03-02",
        "Current time",
    ]
    assert "You are Mochi" in prompt and "Python" in prompt and str(workspace.resolve()) in prompt
    assert "2025-03-02 14:05 (Sunday), time zone Asia/Shanghai (UTC+08:00)" in prompt
    assert "skills/<name>/SKILL.md" in prompt and "memory/MEMORY.md" in prompt
    assert "team lunch" in prompt and "Yesterday" not in prompt
    assert "Always note." in prompt
    seed = builder.build_system_prompt()  # the default: seed 000's order
    assert [line[2:] for line in seed.splitlines() if line.startswith("# ")] == [
        "Identity",
        "Current time",
        "Tool guide",
        "AGENTS.md",
        "SOUL.md",
        "TOOLS.md",
        "IDENTITY.md",
        "Workspace memory",
        "Notes for 2025-03-02",
        "Skill notes",
    ]
    assert sorted(seed) == sorted(prompt)  # the same parts, only in another order


def test_skills_summary_and_availability(
    make: Callable[..., ContextBuilder], workspace: Path
) -> None:
    write_skill(
        workspace,
        "weather",
        "name: weather\ndescription: Look up the weather: forecasts\nrequires:\n  bins: [curl]",
    )
    write_skill(
        workspace, "mail", "name: mail\ndescription: Send mail\nrequires: {env: [SMTP_URL]}"
    )
    write_skill(
        workspace,
        "gated",
        "name: gated\ndescription: d\nalways: true\nrequires: {env: [NOPE]}",
        "GATED BODY",
    )
    write_skill(workspace, "plain", "name: plain\ndescription: plain one", "PLAIN BODY")
    builder = make(
        skills=SkillsLoader(
            workspace / "skills", which=lambda b: None, environ={"SMTP_URL": "smtp://x"}
        )
    )
    prompt = builder.build_system_prompt()
    assert '<skill available="false">\n    <name>weather</name>' in prompt
    assert "Look up the weather: forecasts" in prompt  # fallback parse kept the skill
    assert '<skill available="true">\n    <name>mail</name>' in prompt
    assert "GATED BODY" not in prompt  # an unavailable always-skill is only listed
    assert '<skill available="false">\n    <name>gated</name>' in prompt
    assert "PLAIN BODY" not in prompt
    asked = builder.build_system_prompt(skill_names=["plain"])
    assert "PLAIN BODY" in asked and "<name>plain</name>" not in asked


def test_unknown_requested_skill_is_logged(
    make: Callable[..., ContextBuilder], workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_skill(workspace, "plain", "name: plain\ndescription: d")
    with caplog.at_level(logging.WARNING, logger="core.context"):
        make().build_system_prompt(skill_names=["missing"])
    assert "missing" in caplog.text


def test_static_parts_reread_only_on_change_time_rebuilt_each_turn(
    make: Callable[..., ContextBuilder], workspace: Path
) -> None:
    now = [CLOCK]
    builder = make(clock=lambda: now[0])
    first = builder.build_system_prompt()
    reads = builder.workspace.disk_reads
    for _ in range(5):
        assert builder.build_system_prompt() == first
    assert builder.workspace.disk_reads == reads
    now[0] = datetime(2025, 3, 3, 1, 0, tzinfo=UTC)
    assert "2025-03-03 09:00 (Monday)" in builder.build_system_prompt()
    soul = workspace / "SOUL.md"
    st_ = soul.stat()
    soul.write_text("Grumpy but kind.", encoding="utf-8")
    os.utime(soul, ns=(st_.st_atime_ns, st_.st_mtime_ns + 10**9))
    assert "Grumpy but kind." in builder.build_system_prompt()
    assert builder.workspace.disk_reads == reads + 1


def test_component_priorities_in_report(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    write_skill_root = make().workspace.root
    write_skill(write_skill_root, "w", "name: w\ndescription: d")
    builder = make(tool_guide="guide")
    parts = [
        session_component(
            sender_name="Ann", sender_id="1", platform="qq", chat_id="9", chat_type="group"
        ),
        memory_component("Ann", ["likes tea"]),
        retrieved_component("search result text"),
    ]
    report = builder.build([], "hi", components=parts).report
    rows = {c["name"]: (c["priority"], c["truncatable"]) for c in report.components}
    assert rows["Identity"] == (100, False) and rows["Current time"] == (100, False)
    assert rows["Session"] == (100, False)
    assert rows["SOUL.md"] == (90, True) and rows["Tool guide"] == (90, True)
    assert rows["Sender memory"] == (70, True)
    assert rows["Retrieved material"] == (50, True) and rows["Skills"] == (30, True)


# -- messages, budget, report -----------------------------------------------------------


def test_build_messages_nanobot_shape(make: Callable[..., ContextBuilder], tmp_path: Path) -> None:
    (tmp_path / "cat.png").write_bytes(PNG)
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi!"}]
    messages = make().build_messages(
        history,
        "what is this?",
        media=[tmp_path / "cat.png", tmp_path / "gone.jpg"],
        channel="telegram",
        chat_id="42",
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"].endswith("# Session\nChannel: telegram\nChat ID: 42")
    assert messages[1:3] == history
    cached = make().build_messages(history, "hi", channel="telegram", chat_id="42", layout="cache")
    assert [m["role"] for m in cached] == ["system", "user", "assistant", "system", "user"]
    assert "Channel: telegram\nChat ID: 42" in cached[-2]["content"]  # this turn's tail
    assert "Chat ID" not in cached[0]["content"]
    content = messages[-1]["content"]
    assert content[0]["type"] == "image_url"
    assert content[0]["image_url"]["url"].startswith("data:image/png;base64,")
    assert content[-1] == {"type": "text", "text": "what is this?"} and len(content) == 2


def test_add_assistant_message_and_tool_result() -> None:
    messages: list[dict[str, Any]] = []
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    out = ContextBuilder.add_assistant_message(messages, None, [call])
    assert out is messages and messages[0] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [call],
    }
    ContextBuilder.add_tool_result(messages, "c1", "search", "sunny")
    assert messages[1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "search",
        "content": "sunny",
    }
    ContextBuilder.add_assistant_message(messages, "It is sunny.", None)
    assert messages[2] == {"role": "assistant", "content": "It is sunny."}


def test_history_fitted_exactly_and_reported_as_ranges(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    builder = make(max_tokens=3000, reply_tokens=500)
    history = chat(400, counter)
    built = builder.build(history, "[ann]: and now?")
    report = built.report
    assert report.total_tokens == count_messages(built.messages, counter) <= 2500
    assert report.history_kept + report.history_dropped == 400
    assert 0 < report.history_kept < 400
    assert report.included_ids == list(range(report.history_dropped + 1, 401))
    assert report.dropped_ranges == [(1, report.history_dropped)]
    assert report.history_tokenized == 0  # stored counts trusted
    # the next older message would not have fitted
    older = history[report.history_dropped - 1]
    assert report.total_tokens + counter.count(older.content) + 4 > 2500
    text = format_report(report)
    assert f"{report.history_dropped} dropped" in text and "#1–#" in text


def test_reply_reserve_is_kept_free(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    for reply in (64, 700, 1500):
        built = make(max_tokens=2000, reply_tokens=reply).build(chat(300, counter), "x")
        assert count_messages(built.messages, counter) <= 2000 - reply


def test_tool_group_kept_or_dropped_whole(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    big = "result " * 1500
    history = [
        *chat(10, counter),
        HistoryItem(100, "assistant", "[Search: x]", counter.count("[Search: x]"), group="g"),
        HistoryItem(101, "user", big, counter.count(big), group="g"),
        HistoryItem(102, "assistant", "done", 1),
    ]
    builder = make(max_tokens=1500, reply_tokens=200, history_share=0.0)
    built = builder.build(history, "next")
    ids = built.report.included_ids
    assert (100 in ids) == (101 in ids)
    assert built.report.group_cut and ids == [102]
    built = make(max_tokens=4000, reply_tokens=200).build(history, "next")
    assert {100, 101, 102} <= set(built.report.included_ids)


def test_current_message_too_long_is_cut_not_overflowing(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    builder = make(max_tokens=2000, reply_tokens=200)
    built = builder.build(
        chat(20, counter),
        "word " * 5000,
        images=[{"type": "image_url", "image_url": {"url": "data:x"}}],
    )
    report = built.report
    assert report.current_truncated and report.images == 0
    assert count_messages(built.messages, counter) == report.total_tokens <= 1800
    assert built.messages[-1]["content"].endswith("(message cut to fit the context window)")


def test_non_truncatable_overflow_raises(make: Callable[..., ContextBuilder]) -> None:
    rule = SystemComponent(
        "House rules", "never cut this rule. " * 400, ComponentPriority.CRITICAL, False
    )
    with pytest.raises(ContextOverflowError) as info:
        make(max_tokens=1000, reply_tokens=100).build([], "hi", components=[rule])
    assert "House rules" in info.value.components


def test_recount_ignores_wrong_stored_counts(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    lies = [HistoryItem(i, "user", "many words here " * 20, 1) for i in range(200)]
    builder = make(max_tokens=3000, reply_tokens=300)
    built = builder.build(lies, "hi", recount=True)
    assert count_messages(built.messages, counter) == built.report.total_tokens <= 2700
    assert built.report.history_tokenized == built.report.history_kept + 1


def test_cold_build_tokenizes_only_kept_plus_one(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    cold = [
        HistoryItem(i, "user" if i % 2 else "assistant", f"turn {i} words words", None)
        for i in range(5000)
    ]
    report = make(max_tokens=4000, reply_tokens=200).build(cold, "hi").report
    assert report.history_tokenized == report.history_kept + 1


# -- isolation ----------------------------------------------------------------------------


def test_no_memory_of_one_user_reaches_another(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    builder = make(max_tokens=8000, reply_tokens=500)
    users = [
        (f"user{i}", f"Name{i}", [f"secret-{i}-{j} likes colour {i * 7 + j}" for j in range(3)])
        for i in range(40)
    ]
    order = list(range(len(users))) * 2
    random.Random(5).shuffle(order)
    for index in order:
        uid, name, memories = users[index]
        parts = [
            session_component(
                sender_name=name, sender_id=uid, platform="qq", chat_id="group1", chat_type="group"
            )
        ]
        if index % 5 == 1:
            parts.append(memory_component(name, memories))
        elif index % 5:  # the caller's own component name: must not survive the turn either
            parts.append(SystemComponent(f"Memory {index % 3}", "\n".join(memories)))
        built = builder.build([], f"[{name}]: hi", components=parts)
        text = repr(built.messages)
        for other in range(len(users)):
            if other != index:
                assert f"secret-{other}-" not in text
                assert f"Name{other} " not in text and f"(qq:user{other})" not in text
        if index % 5:
            assert all(m in text for m in memories)
        else:
            assert "Sender memory" not in text and "# Memory" not in text


def test_prompt_identical_to_a_fresh_builder_after_many_turns(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    """Components appearing and disappearing never change the order or leave residue."""
    shared = make()
    rng = random.Random(3)
    for turn in range(30):
        parts = []
        if rng.random() < 0.5:
            parts.append(memory_component("A", [f"fact {turn}"]))
        if rng.random() < 0.5:
            parts.append(retrieved_component(f"found {turn}"))
        if rng.random() < 0.5:
            parts.append(SystemComponent("Extra", f"extra {turn}", ComponentPriority.MEDIUM))
        if rng.random() < 0.5:
            parts.append(
                session_component(sender_name="A", sender_id="1", platform="qq", chat_id="2")
            )
        got = shared.build([], "hi", components=parts).messages
        assert got == make().build([], "hi", components=parts).messages


# -- the daemon seam ------------------------------------------------------------------------


def test_build_turn_builds_from_stored_turns(
    make: Callable[..., ContextBuilder], counter: TokenCounter
) -> None:
    now = datetime(2025, 1, 1, tzinfo=UTC)

    def turn(
        i: int, role: str, kind: str, content: str, meta: dict[str, Any] | None = None
    ) -> Turn:
        return Turn(
            i,
            "qq",
            "g1",
            role,
            kind,
            content,
            counter.count(content),  # type: ignore[arg-type]
            "u1",
            "Ann",
            None,
            meta or {},
            now,
        )

    history = [
        turn(1, "user", "message", "[Ann]: weather in Oslo?"),
        turn(2, "assistant", "tool_call", "[Search: Oslo weather]"),
        turn(3, "user", "tool_result", "<result>rain</result>"),
        turn(4, "assistant", "message", "Rain in Oslo."),
    ]
    message = InboundMessage("qq", "g1", ChatType.GROUP, "u1", "Ann", "and tomorrow?")
    builder = make(max_tokens=4000, reply_tokens=500)
    built = builder.build_turn(
        TurnInput(
            message=message,
            user_content="[Ann]: and tomorrow?",
            user_tokens=counter.count("[Ann]: and tomorrow?"),
            history=history,
            memories=[MemoryItem(1, "qq", "u1", "prefers Celsius", "qq:u1", now)],
            tool_guide="Write [Search: words] to search.",
        )
    )
    system, tail = built.messages[0]["content"], built.messages[-2]["content"]
    assert built.messages[-2]["role"] == "system"
    assert "This turn answers Ann (qq:u1) in the group chat qq:g1" in tail
    assert "prefers Celsius" in tail and "[Search: words]" in system
    assert "Ann" not in system and "Celsius" not in system
    assert [m["content"] for m in built.messages[1:]][-1] == "[Ann]: and tomorrow?"
    assert built.report.history_kept == 4
    assert built.report.total_tokens == count_messages(built.messages, counter)
    assert "Context of the last turn" in format_report(built.report)


# -- property: never over budget ---------------------------------------------------------------

words = st.sampled_from(["hello", "天气", "好", "news", "\n", "🙂", "a.b", "[x]: y", " "])
text_st = st.lists(words, max_size=40).map("".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    history=st.lists(st.tuples(text_st, st.booleans(), st.integers(0, 4)), max_size=60),
    current=text_st,
    memory=st.lists(text_st, max_size=30),
    retrieved=text_st,
    window=st.integers(600, 3000),
    reply=st.integers(16, 400),
)
def test_property_never_over_budget(
    make: Callable[..., ContextBuilder],
    counter: TokenCounter,
    history: list[tuple[str, bool, int]],
    current: str,
    memory: list[str],
    retrieved: str,
    window: int,
    reply: int,
) -> None:
    items = [
        HistoryItem(
            i,
            "user" if kind % 2 else "assistant",
            text,
            counter.count(text) if stored else None,
            group=f"g{i // 2}" if kind == 0 else None,
        )
        for i, (text, stored, kind) in enumerate(history)
    ]
    builder = make(max_tokens=window, reply_tokens=reply)
    try:
        built = builder.build(
            items,
            current,
            components=[memory_component("Bo", memory), retrieved_component(retrieved * 20)],
        )
    except ContextOverflowError as exc:  # legitimate only when the rules alone cannot fit
        assert set(exc.components) == {"Identity", "Current time"}
        assert exc.required_tokens > exc.budget
        assert exc.budget <= window - reply
        return
    total = count_messages(built.messages, counter)
    assert total == built.report.total_tokens <= window - reply
    kept = built.report.included_ids
    assert kept == [item.id for item in items[len(items) - len(kept) :]]  # a suffix
    groups = {item.group for item in items if item.id in kept and item.group}
    assert not any(item.group in groups for item in items if item.id not in kept)
