"""`chatterd kb add|list|remove|search`: the knowledge base from the shell, in a real
process, on the test database (SQLite, or PostgreSQL with CHATTERD_TEST_DATABASE_URL)."""

from __future__ import annotations

from pathlib import Path

from tests.bot.test_cli_e2e import env_for, run_cli
from tests.fakes.openai_server import FakeOpenAI

RULES = """# Server rules

## Bans
Cheating gets you banned for good. 在游戏里使用外挂的玩家会被永久封禁。

## Schedule
The club meets every Tuesday at 19:00 in room 204.
"""


async def test_add_list_search_remove_from_the_command_line(
    tmp_path: Path, database_url: str
) -> None:
    rules = tmp_path / "rules.md"
    rules.write_text(RULES, encoding="utf-8")
    async with FakeOpenAI(reply="unused") as fake:
        env = env_for(tmp_path, fake)
        env["CHATTERD_STORAGE__URL"] = database_url
        env["CHATTERD_KNOWLEDGE__EMBEDDINGS"] = "openai"
        env["CHATTERD_KNOWLEDGE__BASE_URL"] = fake.base_url
        code, out, err = await run_cli(["db", "upgrade"], env)
        assert code == 0, err

        code, out, err = await run_cli(["kb", "add", str(rules), "--chat", "qq:group:5"], env)
        assert code == 0, err
        assert out.startswith("Added #1 rules.md: ") and "passage" in out
        code, out, err = await run_cli(["kb", "add", str(rules), "--chat", "qq:group:5"], env)
        assert code == 0 and out.startswith("Already in the knowledge base: #1"), out + err

        code, out, err = await run_cli(["kb", "list", "--chat", "qq:group:5"], env)
        assert code == 0 and "#1  qq:group:5  rules.md  ready" in out, out + err
        code, out, err = await run_cli(["kb", "list", "--chat", "qq:group:6"], env)
        assert out.strip() == "no documents"

        code, out, err = await run_cli(["kb", "search", "游戏", "--chat", "qq:group:5"], env)
        assert code == 0 and '[1] #1 rules.md · "Bans" — score 0.' in out, out + err
        code, out, err = await run_cli(["kb", "search", "游戏", "--chat", "qq:group:6"], env)
        assert out.strip() == "no passage matches"

        code, out, err = await run_cli(["kb", "remove", "1", "--chat", "qq:group:6"], env)
        assert code == 1 and "no document #1 in qq:group:6" in err
        code, out, err = await run_cli(["kb", "remove", "#1", "--chat", "qq:group:5"], env)
        assert (code, out.strip()) == (0, "removed #1 rules.md from qq:group:5")

        code, out, err = await run_cli(["kb", "add", str(tmp_path / "nope.md"), "--global"], env)
        assert code == 1 and "not added" in err
        code, out, err = await run_cli(["kb", "add", str(rules), "--chat", "bad"], env)
        assert code == 2 and "is not platform:chat_id" in err
