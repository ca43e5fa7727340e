"""`/jobs` and `/jobs cancel` through the daemon's dispatcher (App.build), and
`chatterd jobs list|cancel`: who sees and who may cancel which job."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.cli.main import main
from memory.jobs.types import JobDraft
from memory.turns.store import SqlStorage
from tests.rig import ADMIN, Rig, build_rig, msg

ADMIN_ID = ADMIN.split(":", 1)[1]
GROUP = "-500"


@pytest.fixture
async def rig(storage: SqlStorage, tmp_path: Path) -> AsyncIterator[Rig]:
    async with build_rig(storage, tmp_path) as built:
        yield built


async def add(
    storage: SqlStorage, who: str, name: str, chat: str = GROUP, kind: str = "draw"
) -> int:
    draft = JobDraft(kind, "telegram", chat, "group" if chat == GROUP else "private", who, name)
    return (await storage.jobs.add(draft)).id


async def say(rig: Rig, text: str, sender: str, name: str, chat: str = GROUP) -> str:
    reply = await rig.answer(msg(text, chat=chat, sender=sender, name=name, group=chat == GROUP))
    assert reply is not None
    return reply.text


async def test_members_see_their_own_jobs_and_admins_everyones(rig: Rig) -> None:
    ann = await add(rig.storage, "2", "Ann")
    bob = await add(rig.storage, "3", "Bob", kind="task")
    await add(rig.storage, "2", "Ann", chat="2")  # Ann's private chat: not this group's
    mine = await say(rig, "/jobs", "2", "Ann")
    assert mine.splitlines() == [mine.splitlines()[0]] and f"#{ann} draw — queued" in mine
    assert "by Ann" in mine and "Bob" not in mine
    everyone = await say(rig, "/jobs", ADMIN_ID, "Op")
    assert f"#{bob} task" in everyone and f"#{ann} draw" in everyone
    assert await say(rig, "/jobs", "4", "Cy") == "You have no jobs here."


async def test_only_the_requester_or_an_admin_cancels(rig: Rig) -> None:
    ann = await add(rig.storage, "2", "Ann")
    refused = await say(rig, f"/jobs cancel {ann}", "3", "Bob")
    assert refused == f"Job #{ann} is Ann's: only they or an admin can cancel it."
    assert await say(rig, f"/jobs cancel #{ann}", "2", "Ann") == f"Cancelled job #{ann} (draw)."
    assert await say(rig, f"/jobs cancel {ann}", "2", "Ann") == (
        f"Job #{ann} has already ended (cancelled)."
    )
    other = await add(rig.storage, "3", "Bob")
    assert await say(rig, f"/jobs cancel {other}", ADMIN_ID, "Op") == (
        f"Cancelled job #{other} (draw)."
    )
    elsewhere = await add(rig.storage, "2", "Ann", chat="2")
    assert await say(rig, f"/jobs cancel {elsewhere}", "2", "Ann") == (
        f"There is no job #{elsewhere} in this chat."
    )
    assert (await say(rig, "/jobs cancel", "2", "Ann")).startswith("Usage: /jobs")


async def test_the_command_line_lists_and_cancels_every_chats_jobs(
    storage: SqlStorage, tmp_path: Path, database_url: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    job = await add(storage, "2", "Ann")
    monkeypatch.setenv("CHATTERD_STORAGE__URL", database_url)
    config = tmp_path / "none.toml"
    assert await _cli(["--config", str(config), "jobs", "list"]) == 0
    assert f"telegram:{GROUP}  #{job} draw — queued" in capsys.readouterr().out
    assert await _cli(["--config", str(config), "jobs", "cancel", f"#{job}"]) == 0
    assert f"cancelled job #{job}" in capsys.readouterr().out
    assert await _cli(["--config", str(config), "jobs", "cancel", str(job)]) == 1
    assert await _cli(["--config", str(config), "jobs", "list", "--state", "queued"]) == 0
    assert capsys.readouterr().out.strip() == "no jobs"


async def _cli(argv: list[str]) -> int:
    import asyncio

    return await asyncio.to_thread(main, argv)
