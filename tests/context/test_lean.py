"""A daemon that fits a small server: what it does not use, it does not load.

Each check runs in a fresh interpreter (what is imported is per process) and asserts what
an operator on a small VPS relies on: the default exact counter loads one encoding with
the leaner backend and still counts exactly; python-telegram-bot, the console's pages and
Alembic stay out of a daemon that does not need them; a database behind this code's
schema is migrated by a child process, and one at head is recognised without Alembic.
The resident sizes themselves are measured in bench/memory_bench.py, not here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from memory.db.migrate import Database, parse_url, revision_of, shipped_head, upgrade_in_child
from memory.turns.store import open_storage

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_default_counter_is_exact_and_loads_one_encoding_only() -> None:
    out = run(
        "import sys\n"
        "import tiktoken\n"
        "from core.text.bpe import _load_tiktoken\n"
        "from core.text.tokens import get_counter\n"
        "c = get_counter('o200k_base')\n"
        "print(type(c).__name__, c.exact, c.count('今天天气很好, hello world!'))\n"
        "print('bpe_openai' in sys.modules, _load_tiktoken.cache_info().currsize)\n"
        "print(get_counter('o200k_base').count('🙂🙂 [Ann]: hi'))\n"
    )
    reference = run(
        "import sys\n"
        "sys.modules['tiktoken'] = None\n"
        "from core.text.tokens import get_counter\n"
        "c = get_counter('o200k_base')\n"
        "print(type(c).__name__, c.count('今天天气很好, hello world!'))\n"
        "print(c.count('🙂🙂 [Ann]: hi'))\n"
    )
    assert out[:2] == ["TiktokenCounter", "True"]
    assert out[3:5] == ["False", "1"]  # bpe-openai (every encoding it ships) never loaded
    assert reference[0] == "BpeOpenAICounter"  # the fallback, still exact
    assert [out[2], out[5]] == reference[1:3]


def test_unused_parts_stay_out_of_the_daemon() -> None:
    out = run(
        "import sys\n"
        "import bot.wiring.app, bot.cli.main\n"
        "print(*(m in sys.modules for m in ('telegram', 'jinja2', 'bot.console.web', 'alembic')))\n"
        "from bot.console import Console\n"
        "print('bot.console.web' in sys.modules, Console.__name__)\n"
    )
    assert out == ["False", "False", "False", "False", "True", "Console"]


def test_shipped_head_is_alembics_head() -> None:
    out = run(
        "from memory.db.migrate import head_revision, shipped_head\n"
        "print(shipped_head(), head_revision())"
    )
    assert out[0] == out[1] == shipped_head()


async def test_a_behind_database_is_migrated_by_a_child(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fresh.sqlite"
    assert await upgrade_in_child(url) is True  # empty: a child ran Alembic
    database = Database(parse_url(url), pool_size=1)
    try:
        assert await database.read(revision_of) == shipped_head()
    finally:
        await database.close()
    assert await upgrade_in_child(url) is False  # at head: nothing to run


def test_opening_a_database_at_head_never_imports_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    asyncio.run(_migrated(url))
    out = run(
        "import asyncio, sys\n"
        "from memory.turns.store import open_storage\n"
        "async def main():\n"
        f"    s = await open_storage({url!r})\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
        "print('alembic' in sys.modules)\n"
    )
    assert out == ["False"]


async def _migrated(url: str) -> None:
    store = await open_storage(url)
    await store.close()
