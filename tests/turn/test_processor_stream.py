"""The turn path with a channel that previews replies (core/streaming.py's seam).

The model is the fake OpenAI server streaming real Server-Sent Events; the channel is a
recording implementation of the StreamingOutlet Protocol (the Telegram one is tested
against the fake Bot API in tests/channels/test_telegram_stream.py). What is checked here is the
core's contract: the preview follows the model, the final reply is the stored one, the
channel's record of its preview lands on the intake row, and recovery hands that record
back so a preview cut off by a crash is completed instead of copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.messages import DeliveryError, OutboundMessage, Sent
from core.streaming import StreamRecorder
from core.turn.outcomes import APOLOGY
from core.turn.processor import MessageProcessor
from memory.turns.store import SqlStorage
from tests.fakes.openai_stream import StreamShape
from tests.rig import Rig, build_rig, msg

RECORD = {"stream": {"message_ids": ["501"]}}


class RecordingStream:
    def __init__(self, outlet: PreviewOutlet, target: OutboundMessage, record: StreamRecorder):
        self.outlet = outlet
        self.target = target
        self.record = record
        self.shown: list[str] = []
        self.finished: list[str] = []

    async def show(self, text: str) -> None:
        if not self.shown:
            await self.record(RECORD)  # a preview message now exists
        self.shown.append(text)

    async def finish(self, text: str) -> Sent:
        if self.outlet.refuse_finish:
            raise DeliveryError("telegram: 502 Bad Gateway")
        self.finished.append(text)
        return Sent(("501",))


class PreviewOutlet:
    """A channel that shows previews; records the streams and plain sends it gets."""

    name = "telegram"
    pushes = True

    def __init__(self) -> None:
        self.streams: list[RecordingStream] = []
        self.sent: list[OutboundMessage] = []
        self.refuse_finish = False

    def open_stream(self, message: OutboundMessage, record: StreamRecorder) -> RecordingStream:
        stream = RecordingStream(self, message, record)
        self.streams.append(stream)
        return stream

    async def send(self, message: OutboundMessage) -> Sent:
        self.sent.append(message)
        return Sent(("601",))

    def restore_image(self, locator: str, mime: str | None, name: str) -> None:
        return None


def with_outlet(rig: Rig) -> tuple[MessageProcessor, PreviewOutlet]:
    """The daemon's processor, with a previewing channel for Telegram among its routes."""
    outlet = PreviewOutlet()
    rig.app.routes.add(outlet)
    return rig.processor, outlet


async def test_a_streamed_reply_is_previewed_then_finished_with_the_stored_text(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path) as rig:
        rig.fake.reply("Here is a **long** answer in pieces.", stream=StreamShape(piece_chars=4))
        processor, outlet = with_outlet(rig)

        assert await processor.handle(msg("tell me", group=True, mid="9")) is None

        (stream,) = outlet.streams
        assert stream.target.reply_to_message_id == "9" and stream.target.text == ""
        assert len(stream.shown) > 3 and stream.shown[-1] == "Here is a **long** answer in pieces."
        assert stream.finished == ["Here is a **long** answer in pieces."]
        assert outlet.sent == []  # the stream delivered it: no second copy
        entry = await storage.intake.by_message("telegram", "1", "9")
        assert entry is not None and entry.state == "delivered"
        assert entry.delivery == {"ids": ["501"]}
        reply = await storage.turn_content(entry.reply_turn_id or 0)
        assert reply is not None and reply.content == stream.finished[0]


async def test_a_model_failure_mid_stream_replaces_the_preview_with_the_apology(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path) as rig:
        rig.fake.reply("I think the answer", stream=StreamShape(drop_after=2))
        processor, outlet = with_outlet(rig)

        await processor.handle(msg("question", mid="10"))

        (stream,) = outlet.streams
        assert stream.shown  # the user saw the start
        assert stream.finished == [APOLOGY["unavailable"]]
        entry = await storage.intake.by_message("telegram", "1", "10")
        assert entry is not None and entry.state == "failed"


async def test_an_unfinished_preview_is_completed_by_recovery_not_copied(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path) as rig:
        rig.fake.reply("Final words.", stream=StreamShape(piece_chars=3))
        processor, outlet = with_outlet(rig)
        outlet.refuse_finish = True  # the platform is down when the reply is done

        await processor.handle(msg("hello", group=True, mid="11"))

        entry = await storage.intake.by_message("telegram", "1", "11")
        assert entry is not None and entry.state == "answered"
        assert entry.delivery == RECORD  # the preview's messages are known

        outlet.refuse_finish = False
        assert await processor.redeliver(entry)
        (resent,) = outlet.sent
        assert resent.text == "Final words." and resent.resume == RECORD
        assert resent.reply_to_message_id == "11"
        done = await storage.intake.get(entry.id)
        assert done is not None and done.state == "delivered"


async def test_a_turn_cut_off_mid_stream_is_answered_again_in_the_same_preview(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path) as rig:
        processor, outlet = with_outlet(rig)
        # What a process killed mid-stream leaves: a pending row with its preview recorded.
        accepted = await storage.intake.accept(_draft("12"))
        assert accepted is not None
        assert await storage.intake.note_delivery(accepted.id, RECORD)
        pending = await storage.intake.get(accepted.id)
        assert pending is not None
        rig.fake.reply("Answered after the restart.", stream=StreamShape(piece_chars=5))

        assert await processor.resume(pending)

        (stream,) = outlet.streams
        assert stream.target.resume == RECORD
        assert stream.finished == ["Answered after the restart."]
        done = await storage.intake.get(accepted.id)
        assert done is not None and done.state == "delivered"
        assert not await storage.intake.note_delivery(accepted.id, {"late": True})  # closed


def _draft(message_id: str) -> Any:
    from core.turn.accepted import intake_draft

    return intake_draft(msg("are you still there?", group=True, mid=message_id))
