"""A regression test: a streamed group reply whose preview worker is cancelled the moment
new text arrives must still be finished (close() used to wait for ever on Python 3.11,
whose wait_for() swallows such a cancel; the worker then waited for close()'s lock)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.channels.test_channel_e2e import ALICE as PERSON
from tests.channels.test_channel_e2e import BOT, GROUP, daemon, mention, telegram_section
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.rig import settings_for


async def test_every_group_message_in_a_row_is_answered_with_streaming_on(
    tmp_path: Path, database_url: str
) -> None:
    async with FakeTelegram(username=BOT) as tg, FakeOpenAI(reply="Happy to help.") as model:
        settings = settings_for(tmp_path, database_url, model, telegram=telegram_section(tg))
        assert settings.telegram.streaming == "auto"
        async with daemon(settings):
            for n in range(4):
                text = f"@{BOT} question {n}"
                tg.push_message(GROUP, PERSON, text, entities=mention(text))
                await asyncio.wait_for(tg.wait_for("sendMessage", n + 1), 10)
        assert len(model.requests) == 4
