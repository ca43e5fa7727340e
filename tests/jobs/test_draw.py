"""Pictures end to end (`[images]`): `/draw` and the model's `draw` tool on the real daemon,
the fake Bot API / OneBot, and the fake provider's `/v1/images/generations`.

Asserted on the wire: what the provider was asked (and how often: each call is paid),
the photo the Bot API got (sendPhoto, with the prompt as caption) or the `image`
segment OneBot got, the tools and tool guide in the chat model's request (the `draw`
tool is offered only to whom `[images] allow` lets draw), and the one line the chat is
told for a refusal or a limit.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.wiring.app import App
from channels.onebot.channel import OneBotChannel
from core.images.artist import Artist, ArtistSettings, DrawRefused
from core.images.job import draw_handler
from core.jobs.runner import JobOutcome, JobRunner
from core.media.fetch import DownloadPolicy, SafeDownloader
from core.messages import OutboundMessage, Sent
from core.turn.delivery import NO_PICTURES_NOTE, ChannelRoutes
from memory.jobs.types import JobDraft
from memory.turns.store import SqlStorage
from tests.fakes.onebot_impl import FakeOneBot
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.rig import ADMIN, Rig, build_rig, daemon, msg, settings_for, telegram_section

ALICE = user(1001, "Alice")  # an admin
BOB = user(1002, "Bob")  # a member
QQ_SELF = 10001
QQ_ADMIN = 20002


FAKE_CHAT = {"reply": "Sure."}  # served by conftest.py's `model` fixture


def tg_settings(tmp_path: Path, url: str, model: FakeOpenAI, tg: FakeTelegram) -> Settings:
    """Telegram with Alice as the admin, pictures on (allow: admins, the default)."""
    admin, images = [f"telegram:{ALICE['id']}"], {"enabled": True, "model": "picture-model"}
    return settings_for(
        tmp_path, url, model, telegram=telegram_section(tg), bot={"admins": admin}, images=images
    )


def command(text: str) -> list[dict[str, Any]]:
    return [entity("bot_command", text, text.split()[0])]


def say(tg: FakeTelegram, who: dict[str, Any], text: str) -> None:
    """`who` types `text` (a command) in their private chat with the bot."""
    tg.push_message(private_chat(who), who, text, entities=command(text))


def job_states(app: App) -> Any:
    assert app.storage is not None
    return app.storage.jobs.recent()


async def test_telegram_draw_by_an_admin_is_drawn_once_and_sent_as_a_photo(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings) as app:
        say(tg, ALICE, "/draw a red fox in the snow")
        (answer,) = await tg.wait_for("sendMessage")
        await tg.wait_until(lambda: len(tg.photos) == 1, within_s=10)
        assert app.storage is not None and app.jobs is not None
        await app.jobs.idle()  # marked delivered right after the send
        (job,) = await app.storage.jobs.recent()
        say(tg, ALICE, "/usage")
        (_, usage) = await tg.wait_for("sendMessage", 2)
        today = datetime.now(UTC).date()
        used = await app.storage.usage.grouped("purpose", today, today)
    assert answer.params["text"] == f"🎨 drawing… (#{job.id})"
    (asked,) = model.image_requests  # one provider call: one picture paid for
    assert asked["prompt"] == "a red fox in the snow" and asked["model"] == "picture-model"
    assert asked["response_format"] == "b64_json" and asked["n"] == 1
    (photo,) = tg.photos
    assert photo["chat_id"] == ALICE["id"] and photo["bytes"] == model.image_png
    assert photo["caption"] == "a red fox in the snow"
    assert job.state == "done" and job.delivered_at is not None
    image = {row.key: row.totals for row in used}["image"]
    assert image.calls == 1 and image.tokens == 12 + 272  # the provider's reported usage
    assert model.requests == []  # no chat-model turn was needed for a command
    assert "Your pictures today: 1 of 10 a day" in usage.params["text"]


async def test_telegram_provider_refusal_is_one_plain_line_and_no_photo(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    model.image_refuse = True
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings) as app:
        say(tg, ALICE, "/draw something forbidden")
        (_, told) = await tg.wait_for("sendMessage", 2, within_s=10)
        (job,) = await job_states(app)
    assert told.params["text"] == (
        f"🎨 #{job.id}: The image provider refused to draw this: "
        "Your request was rejected by our safety system."
    )
    assert "\n" not in told.params["text"]
    assert tg.photos == [] and len(model.image_requests) == 1  # not asked again
    assert job.state == "failed"


async def test_telegram_member_under_admins_only_is_refused_by_command(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings) as app:
        say(tg, BOB, "/draw a castle")
        (answer,) = await tg.wait_for("sendMessage")
        jobs = await job_states(app)
    assert answer.params["text"] == (
        "Drawing pictures is not available to you here ([images] allow)."
    )
    assert model.image_requests == [] and jobs == [] and tg.photos == []


async def test_qq_draw_by_an_admin_in_a_group_is_one_image_segment_with_its_caption(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0}
    settings = settings_for(
        tmp_path,
        database_url,
        model,
        onebot=onebot,
        bot={"admins": [f"qq:{QQ_ADMIN}"]},
        images={"enabled": True},
    )
    try:
        async with daemon(settings) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
            await link.next_action("get_login_info")
            event = impl.group_message(
                [{"type": "text", "data": {"text": "/draw a lighthouse at dusk"}}],
                user_id=QQ_ADMIN,
                message_id=777,
            )
            await link.send_event(event)
            sent = await impl.wait_sent(2, limit_s=10)
    finally:
        await impl.close()
    first, picture = sent
    assert any(
        "🎨 drawing… (#" in seg["data"].get("text", "") for seg in first["params"]["message"]
    )
    segments = picture["params"]["message"]
    kinds = [seg["type"] for seg in segments]
    assert kinds == ["reply", "image", "text"]  # answers the message that asked
    assert segments[0]["data"]["id"] == "777"
    encoded = segments[1]["data"]["file"]
    assert encoded.startswith("base64://")
    assert base64.b64decode(encoded.removeprefix("base64://")) == model.image_png
    assert segments[2]["data"]["text"] == "a lighthouse at dusk"
    assert len(model.image_requests) == 1


# -- the model's tool, on the daemon's turn path -----------------------------------------


@pytest.fixture
async def drawing_rig(storage: SqlStorage, tmp_path: Path) -> AsyncIterator[Rig]:
    async with build_rig(storage, tmp_path, images={"enabled": True}) as rig:
        yield rig


def tool_guide(request: Any) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m["role"] == "system")


async def test_the_draw_tool_is_offered_to_admins_only_and_a_forced_call_is_not_run(
    drawing_rig: Rig,
) -> None:
    rig = drawing_rig
    fake = rig.fake
    admin_id = ADMIN.split(":", 1)[1]
    await rig.reply(msg("hello", sender=admin_id, chat=admin_id, name="Op"))
    assert "[Draw:" in tool_guide(fake.requests[-1])
    # A member is not offered the tool at all; a marker written anyway is not run.
    fake.reply("[Draw: a cat wearing a hat]")
    fake.reply("I cannot draw here.")
    await rig.reply(msg("draw me a cat", sender="2", chat="2", name="Bob"))
    asked, follow_up = fake.requests[-2:]
    guide = tool_guide(asked)
    assert "[Search:" not in guide and "[Remember:" in guide  # the guide is there...
    assert "[Draw:" not in guide and "draw a picture" not in guide  # ...without drawing
    assert "not available here" in str(follow_up["messages"][-1]["content"])
    assert fake.image_requests == []
    assert await rig.storage.jobs.recent() == []


async def test_native_mode_leaves_the_draw_function_out_of_a_members_request(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(
        storage, tmp_path, images={"enabled": True}, tools={"mode": "native"}
    ) as rig:
        admin_id = ADMIN.split(":", 1)[1]
        await rig.reply(msg("hello", sender=admin_id, chat=admin_id, name="Op"))
        offered = {t["function"]["name"] for t in rig.fake.requests[-1]["tools"]}
        assert "draw" in offered
        params = next(
            t["function"]["parameters"]
            for t in rig.fake.requests[-1]["tools"]
            if t["function"]["name"] == "draw"
        )
        assert params["required"] == ["prompt"]
        rig.fake.reply_tool_calls([{"name": "draw", "arguments": {"prompt": "a cat"}}])
        rig.fake.reply("No.")
        await rig.reply(msg("draw a cat", sender="2", chat="2", name="Bob"))
        forced, follow_up = rig.fake.requests[-2:]
        assert "draw" not in {t["function"]["name"] for t in forced["tools"]}
        tool_turn = [m for m in follow_up["messages"] if m["role"] == "tool"][-1]
        assert "not available here" in tool_turn["content"]
        assert rig.fake.image_requests == [] and await storage.jobs.recent() == []


async def test_the_admins_tool_call_starts_a_job_and_says_drawing(drawing_rig: Rig) -> None:
    rig = drawing_rig
    admin_id = ADMIN.split(":", 1)[1]
    rig.fake.reply("[Draw: a blue whale]")
    rig.fake.reply("🎨 drawing… (#1)")
    await rig.reply(msg("draw a whale", sender=admin_id, chat=admin_id, name="Op"))
    (job,) = await rig.storage.jobs.recent()
    assert job.kind == "draw" and job.args == {"prompt": "a blue whale"}
    observation = str(rig.fake.requests[-1]["messages"][-1]["content"])
    assert f"🎨 drawing… (#{job.id})" in observation


async def test_the_per_user_daily_limit_refuses_the_next_picture_naming_the_key(
    storage: SqlStorage, tmp_path: Path
) -> None:
    images = {"enabled": True, "allow": "everyone", "max_per_user_per_day": 2}
    async with build_rig(storage, tmp_path, images=images) as rig:
        for _ in range(2):
            reply = await rig.answer(msg("/draw a tree", sender="2", chat="2", name="Bob"))
            assert reply is not None and reply.text.startswith("🎨 drawing… (#")
        refused = await rig.answer(msg("/draw a third tree", sender="2", chat="2", name="Bob"))
        other = await rig.answer(msg("/draw a tree", sender="3", chat="3", name="Cy"))
    assert refused is not None and "[images] max_per_user_per_day = 2" in refused.text
    assert refused.text.startswith("Not drawing: you have had 2 pictures today")
    assert other is not None and other.text.startswith("🎨 drawing…")  # per person
    assert len(await storage.jobs.recent()) == 3


async def test_the_per_chat_daily_limit_names_its_key(storage: SqlStorage, tmp_path: Path) -> None:
    images = {"enabled": True, "allow": "everyone", "max_per_chat_per_day": 1}
    async with build_rig(storage, tmp_path, images=images) as rig:
        first = await rig.answer(msg("/draw a", sender="2", chat="-5", name="Bob", group=True))
        second = await rig.answer(msg("/draw b", sender="3", chat="-5", name="Cy", group=True))
    assert first is not None and first.text.startswith("🎨 drawing…")
    assert second is not None and "[images] max_per_chat_per_day = 1" in second.text


# -- exactly once: the picture kept before it is sent ------------------------------------


class Sink:
    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def __call__(self, message: OutboundMessage) -> Sent:
        self.sent.append(message)
        return Sent(("1",))


def artist_for(fake: FakeOpenAI, timeout_s: float = 10.0, **fetch: Any) -> Artist:
    settings = ArtistSettings(fake.base_url, "sk", "picture-model", "256x256", None, timeout_s)
    policy = DownloadPolicy(max_bytes=1 << 20, **fetch)
    return Artist(settings, SafeDownloader(policy))


async def test_a_picture_not_drawn_in_time_is_one_line(model: FakeOpenAI) -> None:
    model.image_latency_s = 30.0
    artist = artist_for(model, timeout_s=0.5)
    try:
        with pytest.raises(DrawRefused) as refused:
            await artist.draw("a slow sunset")
    finally:
        await artist.close()
    assert str(refused.value) == "The picture was not finished within 0.5 s; nothing was drawn."
    assert len(model.image_requests) == 1  # not retried by the SDK (a retry may pay twice)


async def test_a_url_answer_is_fetched_through_the_safe_fetcher(model: FakeOpenAI) -> None:
    model.image_url = model.picture_url  # on 127.0.0.1: private, refused unless allowed
    refusing, allowing = artist_for(model), artist_for(model, allow_private_hosts=("127.0.0.1",))
    try:
        with pytest.raises(RuntimeError, match="could not be fetched"):
            await refusing.draw("a map")
        drawn = await allowing.draw("a map")
    finally:
        await refusing.close()
        await allowing.close()
    assert drawn.image == model.image_png and drawn.prompt_tokens == 12


class Plain:
    """A channel that shows no pictures (as HTTP push and the console)."""

    name = "http"
    pushes = True

    def __init__(self) -> None:
        self.sent: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> Sent:
        self.sent.append(message)
        return Sent(("1",))

    def restore_image(self, locator: str, mime: str | None, name: str) -> None:
        return None


async def test_a_channel_without_pictures_gets_the_caption_and_a_note() -> None:
    routes, plain = ChannelRoutes(), Plain()
    routes.add(plain)
    await routes.deliver(OutboundMessage("http", "u1", "a red fox", image=b"\x89PNG"))
    (sent,) = plain.sent
    assert sent.image is None
    assert sent.text == f"a red fox\n\n{NO_PICTURES_NOTE}"


async def test_a_picture_kept_by_a_dead_attempt_is_sent_without_drawing_again(
    storage: SqlStorage, model: FakeOpenAI
) -> None:
    draft = JobDraft("draw", "telegram", "7", "private", "7", "Ann", args={"prompt": "a boat"})
    job = await storage.jobs.add(draft)
    past = datetime.now(UTC) - timedelta(hours=1)
    dead = await storage.jobs.claim("dead", past, 60, ("draw",))  # its lease ran out long ago
    assert dead is not None
    kept = base64.b64encode(model.image_png).decode("ascii")
    assert await storage.jobs.checkpoint(dead, "dead", {"image_b64": kept})
    artist, sink = artist_for(model), Sink()
    runner = JobRunner(storage.jobs, {"draw": draw_handler(artist)}, sink, worker="alive")
    try:
        await runner.tick()
        await runner.idle()
    finally:
        await artist.close()
    assert model.image_requests == []  # not paid twice
    (sent,) = sink.sent
    assert sent.image == model.image_png and sent.text == "a boat"
    done = await storage.jobs.get(job.id)
    assert done is not None and done.state == "done" and done.delivered_at is not None
    assert done.progress == {} and done.result == {"bytes": len(model.image_png)}  # sent: dropped


async def test_a_stored_picture_outcome_is_sent_whole_after_a_crash_before_delivery(
    storage: SqlStorage,
) -> None:
    draft = JobDraft("draw", "telegram", "7", "private", "7", "Ann", args={"prompt": "x"})
    await storage.jobs.add(draft)
    claimed = await storage.jobs.claim("gone", datetime.now(UTC), 60, ("draw",))
    assert claimed is not None
    outcome = JobOutcome("x", image=b"\x89PNG-picture")
    assert await storage.jobs.finish(
        claimed, "gone", "done", outcome.text, result=outcome.stored_result()
    )  # ...and the process died before sending it
    sink = Sink()
    runner = JobRunner(storage.jobs, {}, sink, worker="next")
    await runner.tick()
    await runner.tick()
    (sent,) = sink.sent  # once, with its picture
    assert sent.image == b"\x89PNG-picture" and sent.text == "x"
    done = await storage.jobs.get(claimed.id)
    assert done is not None and done.result == {} and done.delivered_at is not None


async def test_telegram_group_picture_answers_the_message_that_asked(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    group = group_chat(-100900, "Artists")
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings):
        text = "/draw@chatterd_test_bot a full moon"
        asked = tg.push_message(group, ALICE, text, entities=command(text))
        await tg.wait_until(lambda: len(tg.photos) == 1, within_s=10)
    (photo,) = tg.photos
    assert photo["chat_id"] == group["id"] and photo["caption"] == "a full moon"
    assert photo["reply_parameters"]["message_id"] == asked["message_id"]
