"""Where the bot serves, decided without the daemon: core/turn/access.py, the `[access]` config,
the chat-settings cache, per-group wake words and the dispatcher's early answer.

The end-to-end side (real channels over the fakes, restarts) is tests/turn/test_access_e2e.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from bot.commands.table import Commands
from bot.config import ConfigError, load_config
from bot.wiring.gate import access_rules, admins_of
from core.admins import Admins
from core.messages import ChatType, InboundMessage
from core.turn.access import AccessRules, NothingSet
from core.turn.delivery import Outbox
from core.turn.gate import Gate
from core.turn.processor import MessageProcessor
from core.turn.triggers import TriggerPolicy, is_command
from memory.chats.settings import ChatSettings
from memory.chats.settings_cache import CachedChatSettings
from memory.chats.types import ChatKey
from memory.turns.store import SqlStorage
from tests.fakes.manual_clock import ManualTicker

ADMIN = "qq:1"


def message(
    text: str = "hello",
    *,
    sender: str = "2",
    chat: str = "group:7",
    group: bool = True,
    platform: str = "qq",
    **extra: Any,
) -> InboundMessage:
    return InboundMessage(
        platform=platform,
        chat_id=chat if group else f"private:{sender}" if platform == "qq" else sender,
        chat_type=ChatType.GROUP if group else ChatType.PRIVATE,
        sender_id=sender,
        sender_name="someone",
        text=text,
        **extra,
    )


def here(chat: str = "group:7", **values: Any) -> ChatSettings:
    return ChatSettings("qq", chat, **values)


LISTED = AccessRules(
    groups="allowlist",
    allowed_groups=frozenset({ChatKey("qq", "group:7")}),
    blocked_users=frozenset({"qq:66"}),
    private="allowlist",
    allowed_users=frozenset({"qq:3"}),
    admins=Admins(frozenset({ADMIN})),
)


# -- the rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "msg", "settings", "serve", "why"),
    [
        (AccessRules(), message(), here(), True, '[access] groups = "all"'),
        (AccessRules(), message(group=False), here(), True, '[access] private = "all"'),
        (LISTED, message(), here(), True, "listed in [access] allowed_groups"),
        (LISTED, message(chat="group:8"), here("group:8"), False, "not in [access] allowed_groups"),
        # /bot allow and /bot deny win over the config, both ways
        (LISTED, message(chat="group:8"), here("group:8", allowed=True), True, "/bot allow"),
        (AccessRules(), message(), here(allowed=False), False, "/bot deny"),
        (LISTED, message(), here(allowed=False), False, "/bot deny"),
        # /bot off silences an allowed group, for everyone's messages but admins' commands
        (LISTED, message(), here(enabled=False), False, "/bot off"),
        (LISTED, message(sender="1"), here(enabled=False), False, "/bot off"),
        (LISTED, message("/help", sender="1"), here(enabled=False), True, "admin's command"),
        (LISTED, message("/help"), here(enabled=False), False, "/bot off"),
        # an admin's command opens any group; their plain messages there are ignored
        (LISTED, message("/bot allow", sender="1", chat="group:8"), here("group:8"), True, "admin"),
        (LISTED, message("hi", sender="1", chat="group:8"), here("group:8"), False, "not in"),
        (LISTED, message("/help", chat="group:8"), here("group:8"), False, "not in"),
        # blocked users: everywhere, commands too; never admins
        (LISTED, message(sender="66"), here(), False, "blocked_users"),
        (LISTED, message("/help", sender="66"), here(), False, "blocked_users"),
        (LISTED, message(sender="3", group=False), here(), True, "allowed_users"),
        (
            AccessRules(blocked_users=frozenset({ADMIN}), admins=Admins(frozenset({ADMIN}))),
            message(sender="1"),
            here(),
            True,
            "groups",
        ),
        # private chats
        (LISTED, message(sender="4", group=False), here(), False, "not in [access] allowed_users"),
        (LISTED, message(sender="1", group=False), here(), True, "an admin"),
        (AccessRules(private="off"), message(group=False), here(), False, 'private = "off"'),
        (
            AccessRules(private="off", admins=Admins(frozenset({ADMIN}))),
            message(sender="1", group=False),
            here(),
            True,
            "an admin",
        ),
        # the console is the operator's own terminal
        (
            AccessRules(private="off"),
            message(group=False, platform="console"),
            here(),
            True,
            "console",
        ),
    ],
)
def test_admit(
    rules: AccessRules, msg: InboundMessage, settings: ChatSettings, serve: bool, why: str
) -> None:
    decided = rules.admit(msg, settings, command=is_command(msg.text))
    assert decided.allowed is serve
    assert why in decided.why


def test_http_ids_are_platform_keys() -> None:
    rules = AccessRules(
        groups="allowlist",
        allowed_groups=frozenset({ChatKey("http", "team")}),
        private="allowlist",
        allowed_users=frozenset({"http:app1"}),
    )
    team = InboundMessage("http", "team", ChatType.GROUP, "u9", "u9", "hi")
    other = InboundMessage("http", "other", ChatType.GROUP, "u9", "u9", "hi")
    assert rules.admit(team, ChatSettings("http", "team"), command=False).allowed
    assert not rules.admit(other, ChatSettings("http", "other"), command=False).allowed
    app1 = InboundMessage("http", "app1", ChatType.PRIVATE, "app1", "app1", "hi")
    app2 = InboundMessage("http", "app2", ChatType.PRIVATE, "app2", "app2", "hi")
    assert rules.admit(app1, ChatSettings("http", "app1"), command=False).allowed
    assert not rules.admit(app2, ChatSettings("http", "app2"), command=False).allowed


# -- the config ----------------------------------------------------------------------------


def test_access_config_reads_the_documented_forms(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        "[access]\n"
        'groups = "allowlist"\n'
        'allowed_groups = ["telegram:-1001234567890", "qq:group:556677", "http:team"]\n'
        'blocked_users = ["qq:10002"]\n'
        'private = "off"\n'
        'allowed_users = ["telegram:222", "http:crm"]\n',
        encoding="utf-8",
    )
    access = load_config(path, environ={}).access
    assert access.groups == "allowlist" and access.private == "off"
    assert access.allowed_groups == ["telegram:-1001234567890", "qq:group:556677", "http:team"]
    settings = load_config(path, environ={})
    rules = access_rules(settings, admins_of(settings))
    assert ChatKey("qq", "group:556677") in rules.allowed_groups
    assert "qq:10002" in rules.blocked_users


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('allowed_groups = ["qq:556677"]', "qq:group:<number>"),
        ('allowed_groups = ["telegram:1234"]', "negative"),
        ('allowed_groups = ["console:x"]', "no groups"),
        ('allowed_groups = ["-100123"]', "not 'platform:id'"),
        ('blocked_users = ["qq:group:5"]', "a QQ user is written qq:<number>"),
        ('allowed_users = ["discord:5"]', "not 'platform:id'"),
        ('groups = "some"', "access.groups"),
        ('private = "friends"', "access.private"),
    ],
)
def test_bad_access_entries_stop_the_daemon_naming_the_key(
    tmp_path: Path, line: str, says: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[access]\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="access") as raised:
        load_config(path, environ={})
    assert says in str(raised.value)


# -- per-group wake words ------------------------------------------------------------------


def test_a_groups_own_wake_words_add_to_the_configured_ones() -> None:
    policy = TriggerPolicy.create("chatterd", ["mochi"])
    said = message("hey Pancake, what time is it?")
    assert not policy.triggers(said)
    assert policy.triggers(said, ("pancake",))
    assert policy.triggers(said, ("PANCAKE ",))  # as stored or typed: case and spaces
    assert not policy.triggers(message("pancakes for all"), ("pancake",))  # whole words
    assert policy.triggers(message("小助手在吗"), ("小助手",))  # CJK: anywhere
    assert policy.triggers(message("mochi?"), ("pancake",))  # the config's still count
    assert not policy.triggers(message("anything"), ("", "  "))  # blanks match nothing


# -- the cache in front of the store -------------------------------------------------------


async def test_cache_sees_another_replicas_change_after_its_ttl(storage: SqlStorage) -> None:
    clock = ManualTicker()
    cache = CachedChatSettings(storage.chat_settings, ttl_s=5.0, clock=clock)
    assert (await cache.get(ChatKey("qq", "group:7"))).enabled is True
    # Another replica (its own cache) switches the group off, straight in the database.
    await storage.chat_settings.update("qq", "group:7", by=ADMIN, enabled=False)
    clock.now += 4.9
    assert (await cache.get(ChatKey("qq", "group:7"))).enabled is True  # still cached
    clock.now += 0.2
    assert (await cache.get(ChatKey("qq", "group:7"))).enabled is False  # read again after ttl_s


async def test_cache_writes_through_and_sees_its_own_change_at_once(storage: SqlStorage) -> None:
    clock = ManualTicker()
    cache = CachedChatSettings(storage.chat_settings, ttl_s=60.0, clock=clock)
    assert (await cache.get(ChatKey("qq", "group:7"))).persona == ""
    await cache.update(ChatKey("qq", "group:7"), by=ADMIN, persona="Be brief.")
    assert (await cache.get(ChatKey("qq", "group:7"))).persona == "Be brief."
    assert (await storage.chat_settings.get("qq", "group:7")).persona == "Be brief."
    await cache.reset(ChatKey("qq", "group:7"), by=ADMIN)
    assert (await cache.get(ChatKey("qq", "group:7"))).persona == ""
    assert cache.peek(ChatKey("qq", "group:8")) is None
    settings = cache.peek(ChatKey("qq", "group:7"))
    assert settings is not None and settings.persona == ""


async def test_cache_warms_from_the_store_and_stays_bounded(storage: SqlStorage) -> None:
    for n in range(7):
        await storage.chat_settings.update("qq", f"group:{n}", by=ADMIN, enabled=n != 3)
    cache = CachedChatSettings(storage.chat_settings, max_chats=5)
    assert await cache.warm() == 5
    known = [cache.peek(ChatKey("qq", f"group:{n}")) for n in range(7)]
    assert [k is not None for k in known] == [True] * 5 + [False] * 2
    assert known[3] is not None and known[3].enabled is False
    await cache.get(ChatKey("qq", "group:6"))  # the least recently used (group:0) makes room
    assert cache.peek(ChatKey("qq", "group:0")) is None
    assert cache.peek(ChatKey("qq", "group:6")) is not None


# -- the gate's one decision (Telegram shows "typing" from it) ----------------------


async def answers(dispatcher: Gate, message: InboundMessage) -> bool:
    return (await dispatcher.decide(message)).answers


async def test_the_decision_knows_access_settings_and_the_groups_wake_words(
    storage: SqlStorage,
) -> None:
    cache = CachedChatSettings(storage.chat_settings)
    commands = Commands(
        store=storage,
        admins=Admins(frozenset({ADMIN})),
        bot_name="chatterd",
        context_report=lambda platform, chat_id: None,
    )
    dispatcher = Gate(
        processor=cast(MessageProcessor, None),  # decide() never reaches the processor
        commands=commands,
        outbox=cast(Outbox, None),  # ... nor sends anything
        policy=TriggerPolicy.create("chatterd", []),
        store_untriggered=True,
        admins=LISTED.admins,
        access=LISTED,
        chat_settings=cache,
    )
    assert await answers(dispatcher, message("chatterd, hi"))
    assert not await answers(dispatcher, message("chatterd, hi", chat="group:8"))  # not listed
    assert await answers(dispatcher, message("/bot allow", sender="1", chat="group:8"))
    await cache.update(ChatKey("qq", "group:7"), by=ADMIN, wake_words=["pancake"])
    assert await answers(dispatcher, message("pancake, hi"))
    assert not await answers(dispatcher, message("pancake, hi", chat="group:9"))
    await cache.update(ChatKey("qq", "group:7"), by=ADMIN, enabled=False)
    assert not await answers(dispatcher, message("chatterd, hi"))
    assert not await answers(dispatcher, message("chatterd, hi", sender="66", chat="group:7"))


def test_a_chat_with_nothing_set_reads_as_a_stored_chats_defaults() -> None:
    """The gate reads private chats as NothingSet without a lookup: the same as a chat
    with no stored row."""
    fields = ("chat_key", "enabled", "allowed", "wake_words", "chime")
    stored, nothing = ChatSettings("qq", "5"), NothingSet(ChatKey("qq", "5"))
    assert [getattr(nothing, f) for f in fields] == [getattr(stored, f) for f in fields]
