"""Voice in and out, end to end: the real daemon, the fake Bot API / OneBot, and the fake
model server's `/v1/audio/transcriptions` and `/v1/audio/speech`.

Asserted on the wire: the bytes the transcription endpoint received (sent as received,
or SILK decoded to WAV), what the chat model was asked, the voice message the Bot API or
OneBot got back, and the usage counted for transcription and speech.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.wiring.app import App
from channels.onebot.channel import OneBotChannel
from core.turn.accepted import restored_message
from tests.fakes.files import MP3_VOICE, OGG_VOICE, make_pdf, make_silk, make_wav
from tests.fakes.onebot_impl import FakeLink, FakeOneBot, MediaServer
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.fakes.telegram_server import FakeTelegram, group_chat, private_chat, user
from tests.rig import daemon, settings_for, telegram_section

BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice")
GROUP = group_chat(-100800, "Voice club")
REPLY = "It is sunny today."
QQ_SELF = 10001


FAKE_CHAT = {"reply": REPLY}  # served by conftest.py's `model` fixture


def tg_settings(
    tmp_path: Path, url: str, model: FakeOpenAI, tg: FakeTelegram, **voice: Any
) -> Settings:
    return settings_for(
        tmp_path,
        url,
        model,
        telegram=telegram_section(tg),
        voice={"enabled": True, "model": "whisper-test", **voice},
        groups={"wake_words": ["bot"]},
    )


def voice_note(tg: FakeTelegram, data: bytes = OGG_VOICE, duration: int = 3) -> dict[str, Any]:
    file_id = tg.add_file(data)
    return {
        "file_id": file_id,
        "file_unique_id": f"u-{file_id}",
        "duration": duration,
        "mime_type": "audio/ogg",
        "file_size": len(data),
    }


async def purposes(app: App) -> set[str]:
    assert app.storage is not None
    today = datetime.now(UTC).date()
    rows = await app.storage.usage.grouped("purpose", today, today)
    return {row.key for row in rows}


async def test_telegram_voice_note_is_heard_and_answered_in_voice(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    model.transcript = "what is the weather like"
    settings = tg_settings(tmp_path, database_url, model, tg, reply="when_spoken")
    async with daemon(settings) as app:
        tg.push_message(private_chat(ALICE), ALICE, None, voice=voice_note(tg))
        (sent,) = await tg.wait_for("sendMessage")
        await tg.wait_until(lambda: len(tg.voices) == 1)
        used = await purposes(app)
    assert sent.params["text"] == REPLY  # the text goes out too
    (heard,) = model.transcriptions
    assert heard["bytes"] == OGG_VOICE and heard["filename"] == "voice.ogg"  # as received
    assert heard["model"] == "whisper-test"
    last = content_text(model.requests[-1]["messages"][-1]["content"])
    assert "(Voice: what is the weather like)" in last
    (spoken,) = model.speech_requests
    assert spoken["input"] == REPLY and spoken["response_format"] == "opus"
    assert tg.voices[0]["chat_id"] == ALICE["id"] and tg.voices[0]["bytes"] == model.speech_audio
    assert {"reply", "transcription", "speech"} <= used


async def test_typed_message_is_not_spoken_under_when_spoken(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = tg_settings(tmp_path, database_url, model, tg, reply="when_spoken")
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, "hello")
        await tg.wait_for("sendMessage")
    assert model.speech_requests == [] and tg.voices == []


async def test_failed_speech_never_loses_the_text(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    model.audio_fails = 10  # every speech call (and its retry) answers 500
    settings = tg_settings(tmp_path, database_url, model, tg, reply="always")
    async with daemon(settings) as app:
        tg.push_message(private_chat(ALICE), ALICE, "hello")
        (sent,) = await tg.wait_for("sendMessage")
        assert app.storage is not None
        turns = await app.storage.recent_turns("telegram", str(ALICE["id"]), 5)
    assert sent.params["text"] == REPLY
    assert model.speech_requests and tg.voices == []
    assert turns[-1].content == REPLY  # stored as always


async def test_mp3_speech_is_transcoded_to_ogg_for_telegram(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    from core.media.audio import pcm_to_wav
    from tests.fakes.files import tone_pcm

    model.speech_audio = pcm_to_wav(tone_pcm(0.5), 24_000)  # a server that ignores "opus"
    settings = tg_settings(tmp_path, database_url, model, tg, reply="always")
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, "hello")
        await tg.wait_for("sendMessage")
        await tg.wait_until(lambda: len(tg.voices) == 1)
    assert tg.voices[0]["bytes"].startswith(b"OggS")


async def test_group_voice_calls_the_bot_only_with_a_wake_word(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    chatter, called = OGG_VOICE + b"1", OGG_VOICE + b"2"
    model.transcripts = {chatter: "just chatting with friends", called: "Bot, is it sunny?"}
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings):
        tg.push_message(GROUP, ALICE, None, voice=voice_note(tg, chatter))
        tg.push_message(GROUP, ALICE, None, voice=voice_note(tg, called))
        (sent,) = await tg.wait_for("sendMessage")
    assert sent.params["chat_id"] == GROUP["id"]
    assert len(model.requests) == 1  # only the wake-word voice note reached the model
    last = content_text(model.requests[-1]["messages"][-1]["content"])
    assert "(Voice: Bot, is it sunny?)" in last
    assert len(model.transcriptions) == 2  # the called one was transcribed once (cached)


async def test_group_voice_past_the_daily_allowance_is_not_transcribed_for_its_wake_word(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    """Hearing a wake word costs a transcription: once Alice has used her allowance, her
    group voice notes are kept as context without one (and her DM gets the notice)."""
    called = OGG_VOICE + b"3"
    model.transcripts = {called: "Bot, is it sunny?"}
    settings = tg_settings(tmp_path, database_url, model, tg)
    settings = settings.model_copy(
        update={"limits": settings.limits.model_copy(update={"user_tokens_per_day": 1})}
    )
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, "hello")  # spends her allowance
        await tg.wait_for("sendMessage", 1)
        tg.push_message(GROUP, ALICE, None, voice=voice_note(tg, called))
        tg.push_message(private_chat(ALICE), ALICE, "still there?")
        (_, notice) = await tg.wait_for("sendMessage", 2)
    assert "allowance" in notice.params["text"]
    assert model.transcriptions == [] and len(model.requests) == 1
    assert all(call.params["chat_id"] != GROUP["id"] for call in tg.calls_of("sendMessage"))


async def test_same_voice_note_twice_is_transcribed_once(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, None, voice=voice_note(tg))
        await tg.wait_for("sendMessage", 1)
        tg.push_message(private_chat(ALICE), ALICE, None, voice=voice_note(tg))
        await tg.wait_for("sendMessage", 2)
    assert len(model.transcriptions) == 1 and len(model.requests) == 2


async def test_voice_longer_than_allowed_is_not_transcribed(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    settings = tg_settings(tmp_path, database_url, model, tg, max_seconds=10)
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, None, voice=voice_note(tg, duration=600))
        await tg.wait_for("sendMessage")
    assert model.transcriptions == [] and tg.calls_of("getFile") == []
    assert "(Voice: longer than 10 seconds, not transcribed)" in content_text(
        model.requests[-1]["messages"][-1]["content"]
    )


async def test_voice_declared_short_but_long_when_measured_is_not_transcribed(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    """Issue 35 item 9: the platform says 1 s; the WAV holds 2,000 s. The length is
    measured from the audio itself, so nothing reaches the speech service."""
    long_wav = make_wav(2000, rate=4_000)  # 8 MB, under the 10 MB cap
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings):
        note = voice_note(tg, long_wav, duration=1) | {"mime_type": "audio/wav"}
        tg.push_message(private_chat(ALICE), ALICE, None, voice=note)
        await tg.wait_for("sendMessage")
    assert model.transcriptions == []
    assert "(Voice: longer than 300 seconds, not transcribed)" in content_text(
        model.requests[-1]["messages"][-1]["content"]
    )


async def test_voice_whose_header_claims_more_than_it_holds_is_heard(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    """The measurement counts decoded samples: a WAV whose header declares an hour but
    holds two seconds is within the limit and is transcribed as sent."""
    wav = make_wav(2, declared_frames=3600 * 8_000)
    settings = tg_settings(tmp_path, database_url, model, tg)
    async with daemon(settings):
        tg.push_message(private_chat(ALICE), ALICE, None, voice=voice_note(tg, wav, duration=2))
        await tg.wait_for("sendMessage")
    (heard,) = model.transcriptions
    assert heard["bytes"] == wav


# -- QQ -------------------------------------------------------------------------------


@asynccontextmanager
async def qq(
    tmp_path: Path, url: str, model: FakeOpenAI, **voice: Any
) -> AsyncIterator[tuple[FakeOneBot, FakeLink]]:
    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {
        "enabled": True,
        "host": "127.0.0.1",
        "port": 0,
        "allow_private_media_hosts": ["127.0.0.1"],
    }
    settings = settings_for(tmp_path, url, model, onebot=onebot, voice={"enabled": True, **voice})
    try:
        async with daemon(settings) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
            await link.next_action("get_login_info")
            yield impl, link
    finally:
        await impl.close()


def at_bot(*segments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "at", "data": {"qq": str(QQ_SELF)}}, *segments]


async def test_qq_record_is_fetched_with_get_record_and_answered_in_voice(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    asked: list[dict[str, Any]] = []

    def get_record(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"file": "/napcat/cache/a.mp3", "base64": base64.b64encode(MP3_VOICE).decode()}

    async with qq(tmp_path, database_url, model, reply="when_spoken") as (impl, link):
        impl.responders["get_record"] = get_record
        record = {"type": "record", "data": {"file": "a1b2.amr"}}
        await link.send_event(impl.group_message(at_bot(record)))
        first = await link.next_action("send_group_msg")
        second = await link.next_action("send_group_msg")
    assert asked[0]["file"] == "a1b2.amr" and asked[0]["out_format"] == "mp3"
    (heard,) = model.transcriptions
    assert heard["bytes"] == MP3_VOICE and heard["filename"] == "voice.mp3"
    assert first["params"]["message"][-1] == {"type": "text", "data": {"text": REPLY}}
    (voice,) = second["params"]["message"]
    encoded = base64.b64encode(model.speech_audio).decode()
    assert voice == {"type": "record", "data": {"file": f"base64://{encoded}"}}


async def test_qq_silk_from_the_segment_url_is_decoded_when_get_record_fails(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    media = await MediaServer().start()
    media.files["voice/a.silk"] = (make_silk(0.5), "application/octet-stream")
    try:
        async with qq(tmp_path, database_url, model) as (impl, link):
            # no get_record responder: the fake answers "API不存在", like an old NapCat
            record = {
                "type": "record",
                "data": {"file": "a.silk", "url": f"{media.base}/voice/a.silk"},
            }
            await link.send_event(impl.group_message(at_bot(record)))
            await link.next_action("send_group_msg")
    finally:
        await media.close()
    (heard,) = model.transcriptions
    assert heard["filename"] == "voice.wav" and heard["bytes"].startswith(b"RIFF")
    assert media.hits == ["voice/a.silk"]
    assert "(Voice: hello from a voice note)" in content_text(
        model.requests[-1]["messages"][-1]["content"]
    )


async def test_qq_file_segment_is_read_through_get_file(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    pdf = make_pdf(["Minutes of the meeting: budget approved"])

    def get_file(params: dict[str, Any]) -> dict[str, Any]:
        assert params["file_id"] == "fid-9"
        return {"file_name": "minutes.pdf", "base64": base64.b64encode(pdf).decode()}

    async with qq(tmp_path, database_url, model) as (impl, link):
        impl.responders["get_file"] = get_file
        file = {
            "type": "file",
            "data": {"file": "minutes.pdf", "file_id": "fid-9", "file_size": str(len(pdf))},
        }
        await link.send_event(impl.group_message(at_bot(file)))
        await link.next_action("send_group_msg")
    last = content_text(model.requests[-1]["messages"][-1]["content"])
    assert "(Document 1: minutes.pdf, 1 page — Minutes of the meeting: budget approved" in last


async def test_qq_file_of_an_accepted_message_is_asked_for_again_after_a_restart(
    tmp_path: Path, database_url: str, model: FakeOpenAI
) -> None:
    """Recovery rebuilds an accepted message from its intake row: the QQ file comes back
    through the account connected now, asked for by the same file id."""
    pdf = make_pdf(["Minutes: budget approved"])
    asked: list[str] = []

    def get_file(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["file_id"])
        return {"file_name": "minutes.pdf", "base64": base64.b64encode(pdf).decode()}

    impl = FakeOneBot(self_id=QQ_SELF)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0}
    settings = settings_for(tmp_path, database_url, model, onebot=onebot)
    file = {"type": "file", "data": {"file": "minutes.pdf", "file_id": "fid-7", "file_size": "9"}}
    try:
        async with daemon(settings) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel) and app.storage is not None
            first = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws"
            )
            await first.next_action("get_login_info")
            impl.responders["get_file"] = get_file
            await first.send_event(impl.group_message(at_bot(file)))
            await first.next_action("send_group_msg")
            await first.close()  # the link the message came on is gone
            second = await impl.connect_reverse(
                f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws"
            )
            await second.next_action("get_login_info")
            entry = await app.storage.intake.get(1)
            assert entry is not None
            (restored,) = restored_message(entry, app.routes).attachments
            assert (restored.kind, restored.name) == ("document", "minutes.pdf")
            assert await restored.fetch() == pdf
    finally:
        await impl.close()
    assert asked == ["fid-7", "fid-7"]
