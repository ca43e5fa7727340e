"""Pictures across SIGKILL: the real `chatterd run` process, killed while drawing and
after the provider answered; each picture is delivered exactly once after the restart.

Counted on the wire: the photos the fake Bot API was sent (sendPhoto) and the requests
the fake provider's `/v1/images/generations` got (each one is paid for).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.telegram_server import entity, private_chat
from tests.faults.daemon import Daemon
from tests.faults.test_nothing_lost import PEOPLE, Harness
from tests.faults.test_reminders_lost import until

pytestmark = pytest.mark.faults

EXTRA = {
    "CHATTERD_IMAGES__ENABLED": "true",
    "CHATTERD_IMAGES__ALLOW": '"everyone"',
    # The default lease (60 s): a dead process's job must be taken over at once, not then.
}


@pytest.fixture
async def harness(tmp_path: Path, database_url: str) -> AsyncIterator[Harness]:
    async with Harness(tmp_path, database_url) as h:
        yield h


def draw(harness: Harness, who: dict, prompt: str) -> None:
    text = f"/draw {prompt}"
    harness.tg.push_message(
        private_chat(who), who, text, entities=[entity("bot_command", text, "/draw")]
    )


def photos_to(harness: Harness, chat_id: int) -> list[dict]:
    return [p for p in harness.tg.photos if int(p["chat_id"]) == chat_id]


async def test_sigkill_while_the_provider_draws_repeats_the_call_and_delivers_once(
    harness: Harness,
) -> None:
    ann = PEOPLE[0]
    harness.model.image_latency_s = 120.0  # the first drawing never finishes in time
    first = await harness.daemon(EXTRA)
    draw(harness, ann, "a kite over the sea")
    (ack,) = await harness.tg.wait_for("sendMessage", 1, within_s=15)
    assert ack.params["text"] == "🎨 drawing… (#1)"
    await until(lambda: len(harness.model.image_requests) == 1, [first])
    first.kill()
    await first.wait()
    harness.model.image_latency_s = 0.0
    second = await harness.daemon(EXTRA)
    await until(lambda: photos_to(harness, ann["id"]), [first, second], within_s=15)
    await second.terminate()
    (photo,) = photos_to(harness, ann["id"])
    assert photo["caption"] == "a kite over the sea" and photo["bytes"] == harness.model.image_png
    assert len(harness.model.image_requests) == 2  # nothing was received the first time


async def test_sigkill_after_the_provider_answered_sends_the_kept_picture_without_paying_again(
    harness: Harness,
) -> None:
    bo = PEOPLE[1]
    first = await harness.daemon(EXTRA)
    draw(harness, bo, "a red bicycle")
    await harness.tg.wait_for("sendMessage", 1, within_s=15)
    harness.tg.hold_sends()  # the photo waits at the platform's door
    await harness.tg.wait_for("sendPhoto", 1, within_s=15)
    first.kill()
    await first.wait()
    harness.tg.release_sends()  # never accepted: its sender is gone
    assert harness.tg.photos == []
    second: Daemon = await harness.daemon(EXTRA)
    await until(lambda: photos_to(harness, bo["id"]), [first, second], within_s=15)
    await second.terminate()
    (photo,) = photos_to(harness, bo["id"])
    assert photo["caption"] == "a red bicycle"
    assert len(harness.model.image_requests) == 1  # the provider was paid once
    assert harness.model.images_answered == 1
