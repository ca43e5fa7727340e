"""QQ channel, forward WebSocket: chatterd connects out to a fake implementation's server."""

from __future__ import annotations

import pytest

from channels.config import OnebotConfig
from channels.onebot.channel import OneBotChannel, OneBotTimings
from core.messages import Reply
from tests.fakes.door import start_answering
from tests.fakes.onebot_impl import FakeOneBot, Recorder, eventually

SELF = 10001


def forward_channel(url: str, token: str | None = "tok") -> OneBotChannel:
    config = OnebotConfig(enabled=True, mode="forward_ws", url=url, access_token=token)
    return OneBotChannel(
        config,
        image_max_bytes=1024,
        timings=OneBotTimings(action_timeout_s=2.0, reconnect_min_s=0.01, reconnect_max_s=0.05),
    )


def test_forward_mode_needs_a_url() -> None:
    with pytest.raises(ValueError, match="forward_ws mode needs url"):
        OneBotChannel(OnebotConfig(mode="forward_ws"), image_max_bytes=1024)


async def test_forward_connects_chats_and_reconnects() -> None:
    impl = FakeOneBot(self_id=SELF)
    server = await impl.serve_forward(token="tok")
    channel = forward_channel(server.url)
    handler = Recorder()
    handler.reply = lambda m: Reply(f"re: {m.text}")
    await start_answering(channel, handler)
    try:
        link = await server.next_link()
        await link.next_action("get_login_info")
        await eventually(lambda: channel.health().state == "running")
        await link.send_event(impl.private_message("hello"))
        msg = await handler.next()
        assert msg.chat_id == "private:20002" and msg.text == "hello"
        [sent] = await impl.wait_sent(1)
        assert sent["params"]["message"] == [{"type": "text", "data": {"text": "re: hello"}}]

        # the implementation restarts: the link drops, chatterd comes back by itself
        await link.close()
        relinked = await server.next_link()
        await relinked.next_action("get_login_info")
        await eventually(lambda: channel.health().state == "running")
        await relinked.send_event(impl.group_message("again"))
        assert (await handler.next()).text == "again"
    finally:
        await channel.stop()
        await impl.close()
    assert channel.health().state == "stopped"


async def test_forward_wrong_token_keeps_retrying_with_backoff() -> None:
    impl = FakeOneBot(self_id=SELF)
    server = await impl.serve_forward(token="right")
    channel = forward_channel(server.url, token="wrong")
    await start_answering(channel, Recorder())
    try:
        await eventually(lambda: server.refused >= 3)
        assert channel.health().state == "reconnecting"
        assert server.links.empty()
    finally:
        await channel.stop()
        await impl.close()


async def test_forward_unreachable_server_reports_reconnecting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    impl = FakeOneBot(self_id=SELF)
    server = await impl.serve_forward()
    url = server.url
    await impl.close()  # nothing listens there any more
    channel = forward_channel(url, token=None)
    await start_answering(channel, Recorder())
    try:
        assert channel.health().state == "reconnecting"
        await eventually(lambda: caplog.text.count("cannot connect") >= 3)
        assert channel.health().state == "reconnecting"
    finally:
        await channel.stop()
