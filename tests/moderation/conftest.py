"""`room`: a Telegram group on the fake Bot API, Olga its creator, the daemon whole."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.moderation.test_moderation_telegram import GROUP, OWNER, Group
from tests.rig import daemon, settings_for, telegram_section


@pytest.fixture
async def room(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, tg: FakeTelegram
) -> AsyncIterator[Group]:
    tg.make_admin(GROUP["id"], OWNER["id"], "creator")
    settings = settings_for(tmp_path, database_url, chat, telegram=telegram_section(tg))
    async with daemon(settings):
        yield Group(tg)
