"""A streamed turn's preview: never a marker (not even half of one), a status line while a
tool runs, and the final reply unchanged. The model is the fake OpenAI server streaming
real Server-Sent Events, cut into small pieces so markers arrive split."""

from __future__ import annotations

import pytest

from core.llm import LLMError, OpenAIProvider
from core.tools.builtin import default_registry
from core.tools.loop import ToolLoop
from core.tools.preview import visible_text
from core.tools.registry import ToolContext
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_stream import StreamShape
from tests.tools.test_toolloop import MESSAGES, ScriptedSearch

CTX = ToolContext(platform="telegram", chat_id="-100", user_id="42", display_name="Ann")
REGISTRY = default_registry(ScriptedSearch())


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Let me check. [", "Let me check."),
        ("Let me check. [Sea", "Let me check."),
        ("Let me check. [ search", "Let me check."),
        ("Let me check. [Search: pyth", "Let me check."),
        ("Let me check. [Search: python] and", "Let me check.  and"),  # as the final reply
        ("See note [1", "See note [1"),
        ("the [search results] were", "the [search results] were"),
        ("[Remember: likes tea]\nHello", "Hello"),
        ("a [Searching for more", "a [Searching for more"),
    ],
)
def test_visible_text_holds_back_what_may_be_a_marker(text: str, shown: str) -> None:
    assert visible_text(REGISTRY, text) == shown


def test_status_line_names_the_tool_and_its_argument() -> None:
    from core.tools.registry import ToolCall

    calls = [ToolCall("search", "weather  paris"), ToolCall("remember", "likes tea")]
    assert REGISTRY.status_line(calls) == "🔎 searching: weather paris\n📝 noting that down"


# conftest.py's `fake` and `llm` fixtures serve these
FAKE_OPENAI = {"reply": "(unscripted)"}
PROVIDER_DEFAULTS = {"api_key": "sk-test", "model": "fake-model"}


class Shown:
    """A preview sink that keeps every text it was given."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, text: str) -> None:
        self.texts.append(text)


async def test_a_search_round_streams_without_ever_showing_the_marker(
    fake: FakeOpenAI, llm: OpenAIProvider
) -> None:
    cut = StreamShape(piece_chars=3)
    fake.reply("Let me check. [Search: weather paris] one moment", stream=cut)
    fake.reply("It is **sunny** in Paris today.", stream=cut)
    backend = ScriptedSearch()
    shown = Shown()

    result = await ToolLoop(default_registry(backend), llm).run(list(MESSAGES), CTX, shown)

    assert result.reply == "It is **sunny** in Paris today."
    assert backend.calls == ["weather paris"]
    assert all(req["stream"] is True for req in fake.requests)
    assert not [t for t in shown.texts if "[" in t or "Search" in t]
    assert "🔎 searching: weather paris" in shown.texts
    status_at = shown.texts.index("🔎 searching: weather paris")
    assert shown.texts[status_at - 1].startswith("Let me check.")
    assert shown.texts[-1] == result.reply  # the preview ends as the stored reply
    growing = shown.texts[status_at + 1 :]
    assert all(b.startswith(a) for a, b in zip(growing, growing[1:], strict=False))


async def test_without_a_preview_the_loop_does_not_stream(
    fake: FakeOpenAI, llm: OpenAIProvider
) -> None:
    fake.reply("Plain answer.")
    result = await ToolLoop(default_registry(ScriptedSearch()), llm).run(list(MESSAGES), CTX)
    assert result.reply == "Plain answer."
    assert not fake.requests[0].get("stream")


async def test_a_stream_cut_after_text_was_shown_is_an_error_not_a_retry(
    fake: FakeOpenAI, llm: OpenAIProvider
) -> None:
    fake.reply("The answer is", stream=StreamShape(drop_after=2))
    shown = Shown()
    with pytest.raises(LLMError):
        await ToolLoop(default_registry(ScriptedSearch()), llm).run(list(MESSAGES), CTX, shown)
    assert shown.texts  # the user saw the start; the processor replaces it with an apology
    assert len(fake.requests) == 1


async def test_native_tool_calls_stream_as_a_status_line_never_as_text(
    fake: FakeOpenAI, llm: OpenAIProvider
) -> None:
    cut = StreamShape(piece_chars=4)
    call = {"name": "search", "arguments": {"query": "tea prices"}}
    fake.reply_tool_calls([call], text="Let me look.", stream=cut)
    fake.reply("Tea costs about 5 euros.", stream=cut)
    backend = ScriptedSearch()
    shown = Shown()

    loop = ToolLoop(default_registry(backend), llm, mode="native")
    result = await loop.run(list(MESSAGES), CTX, shown)

    assert result.reply == "Tea costs about 5 euros." and backend.calls == ["tea prices"]
    assert "🔎 searching: tea prices" in shown.texts
    assert not [t for t in shown.texts if "search(" in t or '"query"' in t or 'tea prices"' in t]
    assert shown.texts[-1] == result.reply
