"""Hostile images (issue 24, items 6 and 7), through the real daemon and the fakes.

6. Memory stays bounded: an image whose header declares more pixels than
   `[vision] max_megapixels` is refused from its header with a clear note, never
   decoded; a Telegram file whose size getFile under-reports or omits is read only up
   to `[vision] max_bytes` — counted by the fake Bot API as bytes it managed to write.
7. One chat's slow images or hung model turns do not hold every slot: another chat's
   photo and another person's turn are answered while they still hang.
"""

from __future__ import annotations

import asyncio
import io
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from channels.onebot.channel import OneBotChannel
from core.media.imaging import TooManyPixels, prepare_image
from memory.turns.store import SqlStorage
from tests.channels.test_channel_e2e import PNG, daemon, exchange, telegram_section
from tests.fakes.onebot_impl import FakeLink, FakeOneBot, MediaServer, eventually
from tests.fakes.openai_server import FakeOpenAI, content_text, last_user_text
from tests.fakes.telegram_server import FakeTelegram, private_chat, user
from tests.rig import settings_for

BOT = "chatterd_test_bot"
ALICE = user(1001, "Alice", "Liddell", username="alice")
QQ_SELF = 10001
DESCRIPTION = "a red bicycle"


def bomb_png(width: int, height: int) -> bytes:
    """A real 1-bit greyscale PNG, all black: a few KB on the wire, `width*height` bytes
    once Pillow decodes it (one byte per pixel)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    row = b"\x00" + bytes((width + 7) // 8)
    packer = zlib.compressobj(9)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    )


def chat_model(body: dict[str, Any]) -> str:
    return "echo: " + (last_user_text(body) or "").splitlines()[0]


FAKE_CHAT = {"reply": chat_model}  # served by conftest.py's `chat` fixture


FAKE_VISION = {"reply": DESCRIPTION}  # served by conftest.py's `vision` fixture


def last_user(chat: FakeOpenAI) -> str:
    return content_text(chat.requests[-1]["messages"][-1]["content"])


async def test_a_pixel_bomb_is_refused_from_its_header_with_a_note(
    tmp_path: Path,
    database_url: str,
    storage: SqlStorage,
    chat: FakeOpenAI,
    vision: FakeOpenAI,
    tg: FakeTelegram,
) -> None:
    bomb = bomb_png(6000, 6000)  # 36 megapixels in about 5 KB
    assert len(bomb) < 100_000
    settings = settings_for(tmp_path, database_url, chat, vision, telegram=telegram_section(tg))
    async with daemon(settings):
        photo = tg.add_photo(bomb)
        sent = await exchange(
            tg,
            lambda: tg.push_message(private_chat(ALICE), ALICE, None, caption="look", photo=photo),
        )
    assert vision.requests == []  # never described, and (the note says) never decoded
    note = "(Image 1: not read: 6000x6000 pixels is 36 megapixels, over the 24 megapixel limit)"
    assert note in last_user(chat)
    assert sent.params["text"] == "echo: [Alice Liddell]: look"
    turns = await storage.recent_turns("telegram", str(ALICE["id"]), 10)
    assert note in turns[0].content


@pytest.mark.parametrize("reported", [1000, None], ids=["under-reported", "omitted"])
async def test_a_telegram_file_is_read_only_up_to_the_cap_whatever_getfile_said(
    reported: int | None,
    tmp_path: Path,
    database_url: str,
    chat: FakeOpenAI,
    vision: FakeOpenAI,
    tg: FakeTelegram,
) -> None:
    cap = 1_000_000
    total = 128 * 1024 * 1024  # what a 200-300 MB upload looks like, smaller
    settings = settings_for(
        tmp_path,
        database_url,
        chat,
        vision,
        telegram=telegram_section(tg),
        vision={"max_bytes": cap},
    )
    async with daemon(settings):
        file_id = tg.add_large_file(PNG, total, reported_size=reported)
        photo = [{"file_id": file_id, "file_unique_id": "big", "width": 1280, "height": 960}]
        sent = await exchange(
            tg,
            lambda: tg.push_message(private_chat(ALICE), ALICE, None, caption="huge", photo=photo),
        )
        await tg.wait_until(lambda: tg.downloads_ended == 1)
    (served,) = tg.served.values()
    # What the server got to write before chatterd hung up: the cap plus what the
    # socket buffers hold, never the whole file.
    assert served < 16 * 1024 * 1024, served
    assert vision.requests == []
    assert "(Image 1: not read: larger than the 1 MB limit)" in last_user(chat)
    assert sent.params["text"] == "echo: [Alice Liddell]: huge"


async def test_a_qq_image_url_is_read_only_up_to_the_cap(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, vision: FakeOpenAI
) -> None:
    media = await MediaServer().start()
    media.streams["huge.png"] = (PNG, 128 * 1024 * 1024)  # chunked: no size is claimed
    impl = FakeOneBot(self_id=QQ_SELF)
    settings = settings_for(
        tmp_path, database_url, chat, vision, onebot=QQ_MEDIA, vision={"max_bytes": 1_000_000}
    )
    try:
        async with daemon(settings) as app:
            link = await connect(app, impl)
            event = impl.group_message(at_bot("huge", f"{media.base}/huge.png"))
            await link.send_event(event)
            await link.next_action("send_group_msg")
    finally:
        await impl.close()
        await media.close()
    assert media.served["huge.png"] < 16 * 1024 * 1024, media.served
    assert vision.requests == []
    assert "(Image 1: not read: larger than the 1 MB limit)" in last_user(chat)


async def connect(app: Any, impl: FakeOneBot) -> FakeLink:
    (channel,) = app.channels
    assert isinstance(channel, OneBotChannel)
    link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
    await link.next_action("get_login_info")
    return link


def at_bot(text: str, *images: str) -> list[dict[str, Any]]:
    segments: list[dict[str, Any]] = [
        {"type": "at", "data": {"qq": str(QQ_SELF)}},
        {"type": "text", "data": {"text": f" {text}"}},
    ]
    segments += [
        {"type": "image", "data": {"file": url.rsplit("/", 1)[-1], "url": url}} for url in images
    ]
    return segments


QQ = {"enabled": True, "host": "127.0.0.1", "port": 0, "send_interval_s": 0}
QQ_MEDIA = QQ | {"allow_private_media_hosts": ["127.0.0.1"]}


async def test_slow_images_in_one_chat_do_not_hold_up_another_chats_photo(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, vision: FakeOpenAI
) -> None:
    media = await MediaServer().start()
    for n in range(3):
        media.files[f"slow{n}.png"] = (PNG, "image/png")
        media.slow.add(f"slow{n}.png")
    media.files["fast.png"] = (PNG, "image/png")
    impl = FakeOneBot(self_id=QQ_SELF)
    settings = settings_for(tmp_path, database_url, chat, vision, onebot=QQ_MEDIA)
    try:
        async with daemon(settings) as app:
            link = await connect(app, impl)
            slow = [f"{media.base}/slow{n}.png" for n in range(3)]
            await link.send_event(impl.group_message(at_bot("three", *slow), group_id=30003))
            await eventually(lambda: media.waiting >= 2, 5.0)
            fast = impl.group_message(
                at_bot("one", f"{media.base}/fast.png"), user_id=20005, group_id=30004
            )
            await link.send_event(fast)
            # Answered while the other chat's three downloads still hang (before the fix
            # they held all three image slots until the download timeout).
            frame = await link.next_action("send_group_msg", limit_s=5.0)
            assert frame["params"]["group_id"] == 30004
            assert media.waiting >= 1 and not media.gate.is_set()
            media.gate.set()
            done = await link.next_action("send_group_msg", limit_s=10.0)
            assert done["params"]["group_id"] == 30003
    finally:
        await impl.close()
        await media.close()
    assert f"(Image 1: {DESCRIPTION})" in content_text(chat.requests[0]["messages"][-1]["content"])


async def test_one_senders_hung_turns_do_not_make_another_chat_wait(
    tmp_path: Path, database_url: str, storage: SqlStorage
) -> None:
    release = asyncio.Event()

    async def model(body: dict[str, Any]) -> str:
        text = last_user_text(body) or ""
        if "hang" in text:
            await release.wait()
        return "echo: " + text.splitlines()[0]

    impl = FakeOneBot(self_id=QQ_SELF)
    async with FakeOpenAI(reply=model, model="chat-model") as chat:
        settings = settings_for(
            tmp_path,
            database_url,
            chat,
            onebot=QQ,
            bot={"max_in_flight": 2, "max_in_flight_per_user": 1},
        )
        try:
            async with daemon(settings) as app:
                link = await connect(app, impl)
                # One person's two turns, in a group and in private, hang on the model.
                await link.send_event(impl.group_message(at_bot("hang one"), group_id=30003))
                await chat.wait_for_requests(1)
                await link.send_event(impl.private_message("hang two"))
                for _ in range(500):  # both accepted before anyone else asks
                    if len(await storage.intake.open_entries()) == 2:
                        break
                    await asyncio.sleep(0.01)
                await link.send_event(
                    impl.group_message(at_bot("hello"), user_id=20005, group_id=30004)
                )
                frame = await link.next_action("send_group_msg", limit_s=5.0)
                assert frame["params"]["group_id"] == 30004
                assert not release.is_set()
                release.set()
                await link.next_action("send_private_msg", limit_s=10.0)
        finally:
            release.set()
            await impl.close()


# -- issue 35 item 5: images near the pixel cap decode small, one at a time per chat ------


class PeakRss:
    """How far the process's resident memory rose above where it stood at the start.

    Linux keeps the peak (VmHWM); writing 5 to /proc/self/clear_refs resets it to the
    current size, so the peak read afterwards belongs to what ran in between (Pillow's
    pixel buffers are C allocations that tracemalloc cannot see)."""

    def __enter__(self) -> PeakRss:
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pytest.skip("cannot reset the peak RSS here (/proc/self/clear_refs)")
        self.start = _status_kb("VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        self.grew_mb = (_status_kb("VmHWM") - self.start) / 1024


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


def photo_jpeg(width: int = 5984, height: int = 3994, *, tag: str = "") -> bytes:
    """A real JPEG just under the 24-megapixel cap (23.9 MP), noisy like a photo."""
    # Grain enough to be a 4.5 MB file, little enough that the 2048-pixel copy sent to
    # the vision model stays under 1 MB.
    picture = Image.effect_noise((width, height), 16).convert("RGB")
    out = io.BytesIO()
    picture.save(out, "JPEG", quality=60, comment=tag.encode())
    return out.getvalue()


def rgba_png(width: int = 5984, height: int = 3994) -> bytes:
    picture = Image.effect_noise((width, height), 40).convert("RGBA")
    out = io.BytesIO()
    picture.save(out, "PNG", compress_level=1)
    return out.getvalue()


def test_a_23_9_megapixel_jpeg_decodes_at_reduced_scale() -> None:
    data = photo_jpeg()
    with PeakRss() as peak:
        ready = prepare_image(data)
    assert (ready.width, ready.height) == (2048, 1367) and ready.downscaled
    # Before: the square draft box decoded it whole, then copied it (about 230 MB).
    assert peak.grew_mb < 60, peak.grew_mb


def test_a_23_9_megapixel_rgba_png_is_shrunk_without_a_second_full_copy() -> None:
    data = rgba_png()
    with PeakRss() as peak:
        ready = prepare_image(data)
    assert (ready.width, ready.height) == (2048, 1367) and ready.mime == "image/png"
    # The decoded RGBA is 96 MB and cannot be avoided; before, a copy and a premultiplied
    # copy came on top (about 290 MB).
    assert peak.grew_mb < 185, peak.grew_mb


async def test_three_photos_near_the_pixel_cap_decode_one_at_a_time(
    tmp_path: Path, database_url: str, chat: FakeOpenAI, vision: FakeOpenAI
) -> None:
    media = await MediaServer().start()
    for n in range(3):  # three different photos: no description is reused
        media.files[f"p{n}.jpg"] = (photo_jpeg(tag=f"photo {n}"), "image/jpeg")
    impl = FakeOneBot(self_id=QQ_SELF)
    settings = settings_for(tmp_path, database_url, chat, vision, onebot=QQ_MEDIA)
    try:
        async with daemon(settings) as app:
            link = await connect(app, impl)
            urls = [f"{media.base}/p{n}.jpg" for n in range(3)]
            with PeakRss() as peak:
                await link.send_event(impl.group_message(at_bot("three", *urls)))
                await link.next_action("send_group_msg", limit_s=60.0)
    finally:
        await impl.close()
        await media.close()
    assert len(vision.requests) == 3
    assert last_user(chat).count(DESCRIPTION) == 3
    # Before: 2 decodes at once of about 230 MB each (issue 35: 475 -> 1,105 MB RSS).
    assert peak.grew_mb < 150, peak.grew_mb


def test_a_webp_past_a_quarter_of_the_pixel_cap_is_refused_from_its_header() -> None:
    """Pillow decodes WebP with about 16 bytes a pixel (libwebp's animation decoder):
    its limit is a quarter of the others', so its memory stays within theirs."""
    out = io.BytesIO()
    Image.new("RGB", (5984, 3994), "white").save(out, "WEBP", lossless=True)
    with pytest.raises(TooManyPixels, match="over the 6 megapixel limit for WebP"):
        prepare_image(out.getvalue())
