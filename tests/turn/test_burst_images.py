"""A burst's images are numbered across its messages (issue 37).

Two photos sent as two quick messages are one turn: its current message must say
"(Image 1: ...)" and "(Image 2: ...)", in the order their image parts reach the model,
not "(Image 1: ...)" twice. Each stored turn, which stands alone in later histories,
keeps numbering its own images from 1. Through the real daemon: fake Bot API, fake chat
and vision models.
"""

from __future__ import annotations

from pathlib import Path

from core.messages import ChatType, ImageRef, InboundMessage
from core.turn.reading import first_images
from memory.turns.store import SqlStorage
from tests.channels.test_channel_e2e import PNG, telegram_section
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tests.rig import daemon, settings_for
from tests.turn.test_bursts import ALICE, GROUP, asked, mentioning, settled


def test_first_images_counts_the_images_before_each_message() -> None:
    def with_images(n: int) -> InboundMessage:
        refs = tuple(ImageRef(fetch=None, name=f"{i}.png") for i in range(n))  # type: ignore[arg-type]
        return InboundMessage("qq", "group:1", ChatType.GROUP, "2", "Ann", "hi", images=refs)

    assert first_images([with_images(1), with_images(0), with_images(2), with_images(1)]) == [
        1,
        2,
        2,
        4,
    ]
    assert first_images([]) == []


async def test_two_photos_in_a_burst_are_image_1_and_image_2(
    tmp_path: Path, database_url: str, storage: SqlStorage, tg: FakeTelegram
) -> None:
    async with (
        FakeOpenAI(reply="nice", model="chat-model") as chat,
        FakeOpenAI(reply="a red bicycle", model="vision-model") as vision,
    ):
        settings = settings_for(
            tmp_path,
            database_url,
            chat,
            vision,
            telegram=telegram_section(tg),
            groups={"burst_ms": 3000, "burst_max_ms": 6000},
        )
        async with daemon(settings):
            for caption in ("first one", "and this?"):
                said = mentioning(caption)
                tg.push_message(
                    GROUP,
                    ALICE,
                    None,
                    photo=tg.add_photo(PNG),
                    caption=said["text"],
                    caption_entities=said["entities"],
                )
            await settled(storage, 2)
    (request,) = chat.requests
    content = asked(request)
    parts = ["first one", "(Image 1: a red bicycle)", "and this?", "(Image 2: a red bicycle)"]
    places = [content.find(part) for part in parts]
    assert -1 not in places and places == sorted(places), content
    assert content.count("(Image 1:") == 1, content
    turns = await storage.recent_turns("telegram", str(GROUP["id"]), 5)
    stored = [t.content for t in turns if t.role == "user"]
    assert all("(Image 1: " in text and "(Image 2:" not in text for text in stored), stored
