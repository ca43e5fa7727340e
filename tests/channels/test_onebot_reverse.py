"""QQ channel, reverse WebSocket transport: auth, one link per account, actions, health."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from channels.config import OnebotConfig
from channels.onebot.actions import ActionFailed, ConnectionLost
from channels.onebot.channel import OneBotChannel, OneBotTimings
from core.messages import DeliveryError, OutboundMessage
from tests.fakes.door import start_answering
from tests.fakes.manual_clock import ManualClock
from tests.fakes.onebot_impl import HOLD, FakeOneBot, Recorder, eventually

SELF = 10001
TOKEN = "s3cret-token"


def config(token: str | None = TOKEN) -> OnebotConfig:
    return OnebotConfig(enabled=True, host="127.0.0.1", access_token=token).model_copy(
        update={"port": 0}
    )


@pytest.fixture
async def channel() -> AsyncIterator[OneBotChannel]:
    clock = ManualClock(auto=True)  # sends are paced on this clock: no real waiting
    ch = OneBotChannel(
        config(), image_max_bytes=1024, timings=OneBotTimings(action_timeout_s=5.0), clock=clock
    )
    await start_answering(ch, Recorder())
    yield ch
    await ch.stop()


@pytest.fixture
async def impl() -> AsyncIterator[FakeOneBot]:
    fake = FakeOneBot(self_id=SELF)
    yield fake
    await fake.close()


def url_of(ch: OneBotChannel) -> str:
    return f"ws://127.0.0.1:{ch.listen_port}/onebot/v11/ws"


@pytest.mark.parametrize("token", [None, "wrong-token", ""])
async def test_missing_or_wrong_token_gets_401_before_upgrade(
    channel: OneBotChannel, impl: FakeOneBot, token: str | None
) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await impl.connect_reverse(url_of(channel), token=token)
    assert info.value.status == 401
    assert channel.health().state == "reconnecting"


async def test_bearer_header_and_query_token_are_accepted(
    channel: OneBotChannel, impl: FakeOneBot
) -> None:
    link = await impl.connect_reverse(url_of(channel), token=TOKEN)
    assert (await link.next_action("get_login_info"))["params"] == {}
    await link.close()
    other = FakeOneBot(self_id=SELF + 1)
    try:
        link2 = await other.connect_reverse(url_of(channel), token=TOKEN, token_in_query=True)
        await link2.next_action("get_login_info")
    finally:
        await other.close()


async def test_trailing_slash_path_is_accepted(channel: OneBotChannel, impl: FakeOneBot) -> None:
    link = await impl.connect_reverse(url_of(channel) + "/", token=TOKEN)
    # accepted: the channel asks the new connection who it is (next_action fails after 3 s)
    assert (await link.next_action("get_login_info"))["params"] == {}


async def test_api_or_event_role_is_refused(channel: OneBotChannel, impl: FakeOneBot) -> None:
    with pytest.raises(aiohttp.WSServerHandshakeError) as info:
        await impl.connect_reverse(url_of(channel), token=TOKEN, role="Event")
    assert info.value.status == 400


async def test_second_connection_for_same_account_replaces_first(
    channel: OneBotChannel, impl: FakeOneBot
) -> None:
    first = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await first.next_action("get_login_info")
    second = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await second.next_action("get_login_info")
    await first.wait_closed()
    assert first.ws.close_code == 4000
    assert channel.health().state == "running"
    await channel.send(OutboundMessage("qq", "group:30003", "on the new link"))
    sent = await second.next_action("send_group_msg")
    assert sent["params"]["message"][-1]["data"]["text"] == "on the new link"
    assert first.actions.empty()


async def test_actions_are_matched_by_echo_out_of_order(
    channel: OneBotChannel, impl: FakeOneBot
) -> None:
    held: list[dict[str, object]] = []

    def hold_first(params: dict[str, object]) -> object:
        if not held:
            held.append(params)
            return HOLD
        return impl._sent(params)

    impl.responders["send_group_msg"] = hold_first
    link = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await link.next_action("get_login_info")
    slow = asyncio.create_task(channel.send(OutboundMessage("qq", "group:1", "first")))
    first_frame = await link.next_action("send_group_msg")
    await channel.send(OutboundMessage("qq", "group:1", "second"))  # answered at once
    assert not slow.done()
    # now answer the first, late, by its echo
    await link.send_event(
        {"status": "ok", "retcode": 0, "data": {"message_id": 1}, "echo": first_frame["echo"]}
    )
    await asyncio.wait_for(slow, 2)
    echoes = {first_frame["echo"], (await link.next_action("send_group_msg"))["echo"]}
    assert len(echoes) == 2


async def test_failed_action_raises_with_retcode(channel: OneBotChannel, impl: FakeOneBot) -> None:
    impl.responders.pop("send_group_msg")  # the fake answers 1404 for unknown actions
    link = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await link.next_action("get_login_info")
    with pytest.raises(DeliveryError) as info:
        await channel.send(OutboundMessage("qq", "group:1", "x"))
    assert isinstance(info.value.__cause__, ActionFailed) and info.value.__cause__.retcode == 1404


async def test_connection_dropped_mid_request_fails_cleanly(
    channel: OneBotChannel, impl: FakeOneBot
) -> None:
    impl.responders["send_group_msg"] = lambda params: HOLD
    link = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await link.next_action("get_login_info")
    pending = asyncio.create_task(channel.send(OutboundMessage("qq", "group:1", "x")))
    await link.next_action("send_group_msg")
    await link.close()
    # action timeout is 5 s; the failure must come from the drop, well before that
    with pytest.raises(DeliveryError) as info:
        await asyncio.wait_for(pending, 2)
    assert isinstance(info.value.__cause__, ConnectionLost)
    await eventually(lambda: channel.health().state == "reconnecting")
    # With nobody connected a reply waits for the connection (bounded) instead of failing.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(channel.send(OutboundMessage("qq", "group:1", "wait")), 0.3)


async def test_heartbeat_tracked_and_silence_closes_the_link(
    channel: OneBotChannel, impl: FakeOneBot
) -> None:
    link = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await link.next_action("get_login_info")
    await link.send_event(impl.lifecycle("connect"))
    await link.send_event(impl.heartbeat(interval_ms=100))
    await eventually(lambda: channel.health().last_ok is not None)
    assert channel.health().state == "running"
    # no more heartbeats: after 3 intervals the channel gives the link up
    await link.wait_closed(limit_s=3)
    await eventually(lambda: channel.health().state == "reconnecting")


async def test_self_id_learned_from_get_login_info_without_header() -> None:
    ch = OneBotChannel(config(), image_max_bytes=1024)
    handler = Recorder()
    await start_answering(ch, handler)
    impl = FakeOneBot(self_id=4242)
    try:
        link = await impl.connect_reverse(url_of(ch), token=TOKEN, self_id_header=False)
        await link.next_action("get_login_info")
        await eventually(lambda: ch.accounts == ["4242"])
        event = impl.group_message([{"type": "at", "data": {"qq": "4242"}}])
        del event["self_id"]  # only get_login_info can have told the channel who it is
        await link.send_event(event)
        assert (await handler.next()).mentions_bot
    finally:
        await ch.stop()
        await impl.close()


async def test_no_token_configured_accepts_anyone(impl: FakeOneBot) -> None:
    ch = OneBotChannel(config(token=None), image_max_bytes=1024)
    await start_answering(ch, Recorder())
    try:
        link = await impl.connect_reverse(url_of(ch))
        assert (await link.next_action("get_login_info"))["params"] == {}  # accepted
    finally:
        await ch.stop()


async def test_stop_closes_links_and_reports_stopped(
    channel: OneBotChannel, impl: FakeOneBot
) -> None:
    link = await impl.connect_reverse(url_of(channel), token=TOKEN)
    await link.next_action("get_login_info")
    await channel.stop()
    await link.wait_closed()
    assert channel.health().state == "stopped"


async def test_send_rejects_foreign_chat_ids(channel: OneBotChannel) -> None:
    # Permanent: such a reply can never be sent, so it is settled `failed` at once.
    with pytest.raises(DeliveryError, match="not a QQ chat id") as refused:
        await channel.send(OutboundMessage("qq", "30003", "x"))
    assert refused.value.permanent
