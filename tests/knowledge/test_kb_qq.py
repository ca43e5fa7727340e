"""`/kb add` as a reply to a file shared in a QQ group, through the fake OneBot v11 over
the reverse WebSocket.

What must hold: the replied-to file is read through `get_file` and indexed in the QQ
group's scope (`qq:group:30003`); that group's addressed question carries the passage and
its source in the model request, another QQ group's does not; a member who is not an
admin is refused.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from channels.onebot.channel import OneBotChannel
from tests.fakes.files import make_pdf
from tests.fakes.onebot_impl import FakeOneBot, sent_text
from tests.fakes.openai_server import FakeOpenAI, content_text
from tests.rig import daemon, settings_for

QQ_SELF, ADMIN, MEMBER = 10001, 20002, 20003
CLUB, OTHER = 30003, 30004
MINUTES = "Minutes: the committee approved a budget of 4,300 yuan for the spring outing."


FAKE_CHAT = {"reply": "Noted."}  # served by conftest.py's `model` fixture


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "data": {"text": value}}


def _club_daemon(tmp_path: Path, database_url: str, model: FakeOpenAI, fake: FakeOpenAI) -> Any:
    return daemon(
        settings_for(
            tmp_path,
            database_url,
            model,
            onebot={"enabled": True, "host": "127.0.0.1", "port": 0},
            bot={"admins": [f"qq:{ADMIN}"]},
            knowledge={"embeddings": "openai", "base_url": fake.base_url},
        )
    )


async def test_kb_add_as_a_reply_to_a_qq_file(
    tmp_path: Path, database_url: str, model: FakeOpenAI, fake: FakeOpenAI
) -> None:
    pdf = make_pdf([MINUTES])
    asked: list[str] = []

    def get_file(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["file_id"])
        return {"file_name": "minutes.pdf", "base64": base64.b64encode(pdf).decode()}

    impl = FakeOneBot(self_id=QQ_SELF)
    impl.responders["get_file"] = get_file
    try:
        async with _club_daemon(tmp_path, database_url, model, fake) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
            await link.next_action("get_login_info")
            file = {
                "type": "file",
                "data": {"file": "minutes.pdf", "file_id": "fid-7", "file_size": str(len(pdf))},
            }
            shared = impl.group_message([file], user_id=MEMBER, group_id=CLUB)
            await link.send_event(shared)
            quote = {"type": "reply", "data": {"id": str(shared["message_id"])}}

            await link.send_event(
                impl.group_message([quote, text("/kb add")], user_id=MEMBER, group_id=CLUB)
            )
            refused = await link.next_action("send_group_msg")
            assert "Only admins can add" in sent_text(refused)
            assert asked == []

            await link.send_event(
                impl.group_message([quote, text("/kb add")], user_id=ADMIN, group_id=CLUB)
            )
            added = sent_text(await link.next_action("send_group_msg"))
            assert added.startswith("📚 adding minutes.pdf (job #1)"), added
            assert asked == ["fid-7"]
            done = sent_text(await link.next_action("send_group_msg"))  # the job's line
            assert done.startswith("📚 added minutes.pdf (#1): 1 passage"), done

            at = {"type": "at", "data": {"qq": str(QQ_SELF)}}
            question = [at, text(" how much money did the committee approve for the outing?")]
            for group in (CLUB, OTHER):
                await link.send_event(impl.group_message(question, user_id=MEMBER, group_id=group))
                await link.next_action("send_group_msg")
                seen = "\n".join(
                    content_text(m.get("content")) for m in model.requests[-1]["messages"]
                )
                if group == CLUB:
                    assert "4,300 yuan" in seen and "[1] minutes.pdf · p. 1" in seen
                else:
                    assert "4,300 yuan" not in seen and "minutes.pdf" not in seen
    finally:
        await impl.close()


async def test_kb_add_reads_a_file_the_bot_never_saw_through_get_msg(
    tmp_path: Path, database_url: str, model: FakeOpenAI, fake: FakeOpenAI
) -> None:
    """The file was shared before this daemon ran: the reply's one `get_msg` answer names
    the file segment, and `get_file` hands over its bytes."""
    pdf = make_pdf([MINUTES])
    looked_up: list[int] = []
    asked: list[str] = []
    unseen = 4242
    file = {
        "type": "file",
        "data": {"file": "minutes.pdf", "file_id": "fid-9", "file_size": len(pdf)},
    }

    def get_msg(params: dict[str, Any]) -> dict[str, Any]:
        looked_up.append(int(params["message_id"]))
        return {"message_id": unseen, "sender": {"user_id": MEMBER}, "message": [file]}

    def get_file(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["file_id"])
        return {"file_name": "minutes.pdf", "base64": base64.b64encode(pdf).decode()}

    impl = FakeOneBot(self_id=QQ_SELF)
    impl.responders["get_msg"] = get_msg
    impl.responders["get_file"] = get_file
    try:
        async with _club_daemon(tmp_path, database_url, model, fake) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
            await link.next_action("get_login_info")
            quote = {"type": "reply", "data": {"id": str(unseen)}}
            await link.send_event(
                impl.group_message([quote, text("/kb add")], user_id=ADMIN, group_id=CLUB)
            )
            added = sent_text(await link.next_action("send_group_msg"))
            assert added.startswith("📚 adding minutes.pdf (job #1)"), added
            done = sent_text(await link.next_action("send_group_msg"))
            assert done.startswith("📚 added minutes.pdf (#1): 1 passage"), done
            assert looked_up == [unseen] and asked == ["fid-9"]

            await link.send_event(impl.group_message([text("/kb list")], group_id=CLUB))
            listed = sent_text(await link.next_action("send_group_msg"))
            assert "#1 minutes.pdf" in listed and "1 passage(s)" in listed, listed
            await link.send_event(
                impl.group_message([text("/kb search committee budget")], group_id=CLUB)
            )
            found = sent_text(await link.next_action("send_group_msg"))
            assert "4,300 yuan" in found, found
    finally:
        await impl.close()


async def test_kb_add_says_nothing_to_add_when_get_msg_fails(
    tmp_path: Path, database_url: str, model: FakeOpenAI, fake: FakeOpenAI
) -> None:
    impl = FakeOneBot(self_id=QQ_SELF)  # get_msg of an id it does not know: refused (1404)
    try:
        async with _club_daemon(tmp_path, database_url, model, fake) as app:
            (channel,) = app.channels
            assert isinstance(channel, OneBotChannel)
            link = await impl.connect_reverse(f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws")
            await link.next_action("get_login_info")
            quote = {"type": "reply", "data": {"id": "4243"}}
            await link.send_event(
                impl.group_message([quote, text("/kb add")], user_id=ADMIN, group_id=CLUB)
            )
            await link.next_action("get_msg")
            answer = sent_text(await link.next_action("send_group_msg"))
            assert answer.startswith("Nothing to add: send /kb add as a reply"), answer
            assert [r["action"] for r in impl.refused] == ["get_msg"]
    finally:
        await impl.close()
