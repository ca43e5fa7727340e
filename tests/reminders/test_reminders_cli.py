"""`chatterd reminders list|cancel`: the operator's view of every chat's reminders."""

from __future__ import annotations

from pathlib import Path

from core.reminders.service import Reminders
from memory.turns.store import open_storage
from tests.bot.test_cli_e2e import env_for, run_cli
from tests.fakes.openai_server import FakeOpenAI
from tests.rig import msg


async def test_list_and_cancel_from_the_command_line(tmp_path: Path) -> None:
    async with FakeOpenAI(reply="unused") as fake:
        env = env_for(tmp_path, fake)
        store = await open_storage(env["CHATTERD_STORAGE__URL"])
        try:
            reminders = Reminders(store.reminders, default_zone="Asia/Shanghai")
            for chat, text in (("group:30003", "stand up"), ("private:20002", "tea")):
                group = chat.startswith("group")
                message = msg("", platform="qq", chat=chat, sender="20002", group=group)
                await reminders.set_from_text(message, f"every day 09:00 {text}")
        finally:
            await store.close()
        code, out, err = await run_cli(["reminders", "list"], env)
        assert code == 0, err
        lines = out.splitlines()
        assert len(lines) == 2
        assert lines[0].startswith("qq:group:30003  #1 next 09:00")
        assert "(Asia/Shanghai, UTC+08:00) [every day 09:00] (by Alice): stand up" in lines[0]
        code, out, err = await run_cli(["reminders", "list", "--chat", "qq:private:20002"], env)
        assert out.count("\n") == 1 and "tea" in out
        code, out, err = await run_cli(["reminders", "cancel", "#1"], env)
        assert (code, out.strip()) == (0, "cancelled #1 in qq:group:30003: stand up")
        code, out, err = await run_cli(["reminders", "cancel", "1"], env)
        assert code == 1 and "no active reminder #1" in err
        code, out, err = await run_cli(["reminders", "list"], env)
        assert "stand up" not in out and "tea" in out
