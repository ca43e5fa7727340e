"""Background tasks (`spawn`, core/background/) on the real daemon: the fake Bot API, the fake
OpenAI chat model, and the job runner delivering through the one door.

Asserted on the wire: the "🔧 working on it (#id)" line the turn sends, the task's own
multi-step tool loop in the model's requests (each step sees the previous step's
results), its answer sent once as a reply to the message that asked, its tokens in the
requester's usage, the plain out-of-steps wording, and the `[jobs] spawn_allow` rule
(spawn not offered to a member, a forced call not run).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.wiring.app import Seams
from channels.onebot.channel import OneBotChannel
from core.admins import Admins
from core.background.desk import TaskDesk, TaskRequest, TaskRules
from core.tools.search import SearchResult
from memory.turns.store import SqlStorage
from memory.usage.types import UsageScope
from tests.fakes.onebot_impl import FakeOneBot
from tests.fakes.openai_server import FakeOpenAI, FakeReply, content_text
from tests.fakes.telegram_server import FakeTelegram, entity, group_chat, private_chat, user
from tests.rig import ADMIN, build_rig, daemon, msg, settings_for, telegram_section

ALICE = user(1001, "Alice")
BOT = "@chatterd_test_bot"
TASK_SYSTEM = "working in the background on task"


class ShopSearch:
    """A SearchBackend with one price per query; remembers the queries."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    async def search(self, query: str) -> list[SearchResult]:
        self.queries.append(query)
        price = "3 €" if "A" in query else "4 €"
        return [SearchResult(f"{query} price", "https://example.org/shop", f"costs {price}")]


def texts(body: dict[str, Any]) -> list[str]:
    return [content_text(m.get("content")) for m in body["messages"]]


def is_task(body: dict[str, Any]) -> bool:
    return TASK_SYSTEM in texts(body)[0]


def shopping(steps: int) -> Any:
    """The model: in a turn it spawns the task (then says what the tool told it); in the
    task it searches `steps` times, one shop a step, then answers."""

    def answer(body: dict[str, Any]) -> str | FakeReply:
        said = texts(body)
        if not is_task(body):
            if any("spawn_result" in text for text in said):
                return "🔧 working on it."
            return "[Spawn: compare the price of shop A and shop B]"
        done = sum(text.count("<search_results") for text in said[1:])
        if done < steps and "That was the last tool round" not in said[-1]:
            return f"[Search: shop {'AB'[done % 2]} step {done + 1}]"
        return FakeReply("Shop A is cheaper: 3 € against 4 €.", None, "stop", 100, 20)

    return answer


FAKE_CHAT = {"reply": shopping(2)}  # served by conftest.py's `model` fixture


async def test_a_background_task_answers_as_a_reply_after_a_multi_step_loop(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    search = ShopSearch()
    group = group_chat(-100777, "Shoppers")
    settings = settings_for(
        tmp_path,
        database_url,
        model,
        telegram=telegram_section(tg),
        tools={"search": True},
    )
    async with daemon(settings, Seams(search=search)) as app:
        words = f"{BOT} which shop is cheaper, A or B?"
        asked = tg.push_message(group, ALICE, words, entities=[entity("mention", words, BOT)])
        (ack, answer) = await tg.wait_for("sendMessage", 2, within_s=20)
        assert app.storage is not None and app.jobs is not None
        await app.jobs.idle()
        (job,) = await app.storage.jobs.recent()
        today = datetime.now(UTC).date()
        scope = UsageScope(platform="telegram", user_id=str(ALICE["id"]))
        used = await app.storage.usage.totals(today, today, scope)
    assert ack.params["text"] == "🔧 working on it."
    assert answer.params["text"] == f"🔧 #{job.id}: Shop A is cheaper: 3 € against 4 €."
    assert answer.params["reply_parameters"]["message_id"] == asked["message_id"]
    assert job.kind == "task" and job.state == "done" and job.delivered_at is not None
    assert job.args == {"task": "compare the price of shop A and shop B"}
    assert search.queries == ["shop A step 1", "shop B step 2"]  # two steps, in order
    task_calls = [r for r in model.requests if is_task(r.json)]
    assert len(task_calls) == 3  # two tool rounds, then the answer
    assert "costs 3 €" in "\n".join(texts(task_calls[1].json))  # step 2 saw step 1
    assert job.result["steps"] == 2 and job.cost_tokens >= 120
    assert job.cost_tokens > 0 and used.tokens >= job.cost_tokens  # the requester's usage
    assert len(tg.calls_of("sendMessage")) == 2  # the answer once


async def test_a_task_out_of_steps_says_so_plainly(storage: SqlStorage, tmp_path: Path) -> None:
    search = ShopSearch()
    async with build_rig(
        storage, tmp_path, reply=shopping(99), search=search, jobs={"max_steps": 3}
    ) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        await rig.reply(msg("compare the shops", sender="2", chat="2", name="Bob"))
        runner = rig.app.jobs
        assert runner is not None
        assert await runner.tick() == 1
        await runner.idle()
        (job,) = await storage.jobs.recent()
    assert len(search.queries) == 3
    assert job.outcome is not None
    assert job.outcome == (
        f"🔧 #{job.id} ran out of steps after 3: here is what I have …\n\n"
        "Shop A is cheaper: 3 € against 4 €."
    )
    assert job.state == "done" and job.result["steps"] == 3


async def test_a_task_that_never_answers_says_it_ran_out_of_steps_not_done(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path, search=ShopSearch(), jobs={"max_steps": 2}) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        rig.fake.set_default("[Search: shop A]")  # markers even when told to answer
        rig.fake.reply("[Spawn: compare the shops]")
        rig.fake.reply("🔧 working on it.")
        await rig.reply(msg("compare the shops", sender="2", chat="2", name="Bob"))
        runner = rig.app.jobs
        assert runner is not None
        await runner.tick()
        await runner.idle()
        (job,) = await storage.jobs.recent()
    assert job.outcome == (
        f"🔧 #{job.id} ran out of steps after 2 without an answer: I found nothing I could use."
    )
    assert job.state == "failed"


async def test_a_task_over_its_token_budget_stops_and_names_the_key(
    storage: SqlStorage, tmp_path: Path
) -> None:
    search = ShopSearch()
    async with build_rig(
        storage, tmp_path, reply=shopping(99), search=search, jobs={"max_tokens": 1000}
    ) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        rig.fake.set_default(_costly(shopping(99)))
        await rig.reply(msg("compare the shops", sender="2", chat="2", name="Bob"))
        runner = rig.app.jobs
        assert runner is not None
        await runner.tick()
        await runner.idle()
        (job,) = await storage.jobs.recent()
    assert len(search.queries) == 2  # 600 tokens a call: the budget is spent in step 2
    assert job.outcome is not None
    assert "([jobs] max_tokens = 1000) after 2 steps: here is what I have" in job.outcome


def _costly(inner: Any) -> Any:
    def answer(body: dict[str, Any]) -> FakeReply:
        text = inner(body)
        text = text if isinstance(text, str) else text.text
        return FakeReply(text, None, "stop", 500, 100)

    return answer


async def test_spawn_is_not_offered_to_a_member_and_a_forced_call_is_not_run(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path, jobs={"spawn_allow": "admins"}) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        admin_id = ADMIN.split(":", 1)[1]
        await rig.reply(msg("hello", sender=admin_id, chat=admin_id, name="Op"))
        assert "[Spawn:" in "\n".join(texts(rig.fake.requests[-1].json))
        rig.fake.reply("[Spawn: read three pages]")
        rig.fake.reply("I cannot do that here.")
        await rig.reply(msg("do a long task", sender="2", chat="2", name="Bob"))
        asked, follow_up = rig.fake.requests[-2:]
        assert "[Spawn:" not in texts(asked.json)[0]
        assert "not available here" in texts(follow_up.json)[-1]
        assert await storage.jobs.recent() == []


async def test_native_mode_offers_spawn_by_rule_and_not_inside_a_task(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(
        storage, tmp_path, tools={"mode": "native"}, jobs={"spawn_allow": "admins"}
    ) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        admin_id = ADMIN.split(":", 1)[1]
        rig.fake.reply_tool_calls([{"name": "spawn", "arguments": {"task": "sum 2 and 2"}}])
        rig.fake.reply("🔧 working on it.")
        await rig.reply(msg("sum it in the background", sender=admin_id, chat=admin_id))
        offered = {t["function"]["name"] for t in rig.fake.requests[0]["tools"]}
        assert "spawn" in offered
        rig.fake.reply_tool_calls([{"name": "spawn", "arguments": {"task": "again"}}])
        rig.fake.reply("4")
        runner = rig.app.jobs
        assert runner is not None
        await runner.tick()
        await runner.idle()
        inside = rig.fake.requests[2]
        assert "spawn" not in {t["function"]["name"] for t in inside["tools"]}
        tool_turn = [m for m in rig.fake.requests[3]["messages"] if m["role"] == "tool"][-1]
        assert "not available here" in tool_turn["content"]
        rig.fake.reply_tool_calls([{"name": "spawn", "arguments": {"task": "x"}}])
        rig.fake.reply("No.")
        await rig.reply(msg("and you?", sender="2", chat="2", name="Bob"))
        assert "spawn" not in {t["function"]["name"] for t in rig.fake.requests[-2]["tools"]}
        jobs = await storage.jobs.recent()
    assert [j.requester_id for j in jobs] == [admin_id]  # one task, the admin's
    assert jobs[0].outcome is not None and jobs[0].outcome.endswith("4")


async def test_pending_tasks_per_person_are_refused_naming_the_key(
    storage: SqlStorage, tmp_path: Path
) -> None:
    async with build_rig(storage, tmp_path, jobs={"max_per_user": 1}) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        for _ in range(2):
            rig.fake.reply("[Spawn: a long task]")
            rig.fake.reply("ok")
            await rig.reply(msg("go", sender="2", chat="2", name="Bob"))
        refused = texts(rig.fake.requests[-1].json)[-1]
        jobs = await storage.jobs.recent()
    assert len(jobs) == 1
    assert "[jobs] max_per_user" in refused and "Not started" in refused


async def test_a_scheduled_turn_may_spawn_with_its_owners_permission(
    storage: SqlStorage, tmp_path: Path
) -> None:
    """A /schedule turn is its owner's: spawn is offered by their rule, and the task's
    answer mentions them instead of quoting the scheduled turn's own (non-platform) id."""
    admin_id = ADMIN.split(":", 1)[1]
    async with build_rig(storage, tmp_path, jobs={"spawn_allow": "admins"}) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        rig.fake.reply("[Spawn: summarise the new issues]")
        rig.fake.reply("🔧 working on it.")
        owner = msg("daily digest", sender=admin_id, chat="-5", group=True, mid="schedule:3:1")
        await rig.reply(owner)
        assert "[Spawn:" in texts(rig.fake.requests[-2].json)[0]
        member = msg("daily digest", sender="2", chat="-5", group=True, mid="schedule:4:1")
        await rig.reply(member)
        assert "[Spawn:" not in texts(rig.fake.requests[-1].json)[0]
        (job,) = await storage.jobs.recent()
    assert job.requester_id == admin_id and job.chat_id == "-5" and job.chat_type == "group"
    assert job.origin_message_id is None  # the outcome mentions the owner instead


async def test_a_turn_run_again_finds_its_task_instead_of_starting_a_second(
    storage: SqlStorage,
) -> None:
    """Recovery runs a turn again when its process died before its answer was stored: the
    model spawns again for the same message, and is given the task its first run started."""
    desk = TaskDesk(storage.jobs, TaskRules(allow="everyone", admins=Admins()))
    asked = TaskRequest("telegram", "2", "private", "2", "Bob", message_id="41", task="read")
    first = await desk.ask(asked)
    again = await desk.ask(replace(asked, task="read the pages"))
    other = await desk.ask(replace(asked, message_id="42"))
    assert first.job_id is not None and again == first
    assert other.job_id not in (None, first.job_id)
    assert len(await storage.jobs.recent()) == 2


async def test_a_chat_no_later_answer_can_reach_is_told_to_do_the_task_now(
    storage: SqlStorage, tmp_path: Path
) -> None:
    """The rig's channel answers only waiting requests (as HTTP without push_url does): a
    task's answer could never arrive there, so spawn stores nothing and says why."""
    async with build_rig(storage, tmp_path) as rig:
        rig.fake.reply("[Spawn: read three pages]")
        rig.fake.reply("Here it is, done now.")
        await rig.reply(msg("read them", sender="2", chat="2", name="Bob"))
        told = texts(rig.fake.requests[-1].json)[-1]
        jobs = await storage.jobs.recent()
    assert "do the task now, in this turn, instead" in told and jobs == []


async def test_a_task_has_its_requesters_tools_only(storage: SqlStorage, tmp_path: Path) -> None:
    """`draw` is the admins' ([images] allow): a member's task is not offered it, and a
    call written anyway is not run; an admin's task is offered it."""
    admin_id = ADMIN.split(":", 1)[1]
    one_at_a_time = {"max_running": 1}
    async with build_rig(storage, tmp_path, images={"enabled": True}, jobs=one_at_a_time) as rig:
        rig.channel.pushes = True  # a chat a later answer can reach
        for who in ("2", admin_id):
            rig.fake.reply("[Spawn: draw a cat]")
            rig.fake.reply("🔧 working on it.")
            await rig.reply(msg("a cat, later", sender=who, chat=who, name=f"P{who}"))
        runner = rig.app.jobs
        assert runner is not None
        rig.fake.reply("[Draw: a cat]")  # the member's task tries anyway
        rig.fake.reply("I could not draw it.")
        await runner.tick()  # the member's task runs first (the older job)...
        await runner.idle()
        member_task, member_after = rig.fake.requests[4:6]
        rig.fake.reply("A cat, described.")
        await runner.tick()  # ...then the admin's
        await runner.idle()
        admin_task = rig.fake.requests[6]
        jobs = {job.requester_id: job for job in await storage.jobs.recent()}
    assert "[Draw:" not in texts(member_task.json)[0]
    assert "not available here" in texts(member_after.json)[-1]
    assert "[Draw:" in texts(admin_task.json)[0]
    assert [job.kind for job in jobs.values()] == ["task", "task"]  # no draw job was made
    assert rig.fake.image_requests == []


async def test_qq_group_task_answer_is_a_reply_to_the_message_that_asked(
    tmp_path: Path, database_url: str
) -> None:
    impl = FakeOneBot(self_id=10001)
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0}
    async with FakeOpenAI(reply=shopping(1), model="chat-model") as model:
        settings = settings_for(
            tmp_path, database_url, model, onebot=onebot, tools={"search": True}
        )
        try:
            async with daemon(settings, Seams(search=ShopSearch())) as app:
                (channel,) = app.channels
                assert isinstance(channel, OneBotChannel)
                url = f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws"
                link = await impl.connect_reverse(url)
                await link.next_action("get_login_info")
                words = [
                    {"type": "at", "data": {"qq": "10001"}},
                    {"type": "text", "data": {"text": " which shop is cheaper?"}},
                ]
                await link.send_event(impl.group_message(words, user_id=20002, message_id=777))
                ack, answer = await impl.wait_sent(2, limit_s=20)
        finally:
            await impl.close()
    said = [seg["data"].get("text", "") for seg in ack["params"]["message"]]
    assert "🔧 working on it." in "".join(said)
    segments = answer["params"]["message"]
    assert segments[0] == {"type": "reply", "data": {"id": "777"}}
    assert "".join(s["data"].get("text", "") for s in segments[1:]).endswith(
        "Shop A is cheaper: 3 € against 4 €."
    )


async def test_a_private_task_answer_is_a_reply_too_that_telegram_sends_if_the_ask_is_gone(
    tmp_path: Path, database_url: str, model: FakeOpenAI, tg: FakeTelegram
) -> None:
    """In a DM the answer comes minutes later, after other messages: it quotes the ask,
    and asks Telegram to send it anyway where that message was deleted meanwhile."""
    settings = settings_for(
        tmp_path, database_url, model, telegram=telegram_section(tg), tools={"search": True}
    )
    async with daemon(settings, Seams(search=ShopSearch())) as app:
        asked = tg.push_message(private_chat(ALICE), ALICE, "which shop is cheaper, A or B?")
        (_ack, answer) = await tg.wait_for("sendMessage", 2, within_s=20)
        assert app.jobs is not None
        await app.jobs.idle()
    assert answer.params["text"].endswith("Shop A is cheaper: 3 € against 4 €.")
    assert answer.params["reply_parameters"] == {
        "message_id": asked["message_id"],
        "allow_sending_without_reply": True,
    }


async def _qq_task(tmp_path: Path, database_url: str, event: Any, gone: set[int]) -> Any:
    """A QQ daemon asked for a task by `event`; the implementation's sent messages."""
    impl = FakeOneBot(self_id=10001)
    impl.gone = gone
    onebot = {"enabled": True, "host": "127.0.0.1", "port": 0}
    async with FakeOpenAI(reply=shopping(1), model="chat-model") as model:
        settings = settings_for(
            tmp_path, database_url, model, onebot=onebot, tools={"search": True}
        )
        try:
            async with daemon(settings, Seams(search=ShopSearch())) as app:
                (channel,) = app.channels
                assert isinstance(channel, OneBotChannel)
                url = f"ws://127.0.0.1:{channel.listen_port}/onebot/v11/ws"
                link = await impl.connect_reverse(url)
                await link.next_action("get_login_info")
                await link.send_event(event(impl))
                sent = await impl.wait_sent(2, limit_s=20)
        finally:
            await impl.close()
    return sent, impl.refused


async def test_qq_private_task_answer_quotes_the_message_that_asked(
    tmp_path: Path, database_url: str
) -> None:
    words = [{"type": "text", "data": {"text": "which shop is cheaper?"}}]
    (_ack, answer), refused = await _qq_task(
        tmp_path, database_url, lambda impl: impl.private_message(words, message_id=778), set()
    )
    assert answer["action"] == "send_private_msg"
    assert answer["params"]["message"][0] == {"type": "reply", "data": {"id": "778"}}
    assert refused == []


async def test_qq_task_answer_goes_plainly_when_the_message_that_asked_is_gone(
    tmp_path: Path, database_url: str
) -> None:
    """QQ refuses a send that quotes a recalled message: the answer goes once, unquoted."""
    words = [
        {"type": "at", "data": {"qq": "10001"}},
        {"type": "text", "data": {"text": " which shop is cheaper?"}},
    ]
    (_ack, answer), refused = await _qq_task(
        tmp_path, database_url, lambda impl: impl.group_message(words, message_id=779), {779}
    )
    segments = answer["params"]["message"]
    assert [s["type"] for s in segments] == ["text"]
    assert segments[0]["data"]["text"].endswith("Shop A is cheaper: 3 € against 4 €.")
    assert [r["action"] for r in refused] == ["send_group_msg", "send_group_msg"]
