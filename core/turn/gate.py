"""The gate: every inbound message passes here, the one place policy is decided.

Channels only report facts; here, once, before anything reaches the processor: is it a
command, is the bot serving this chat and sender (if not, nothing is answered or
stored), does it trigger the bot, and is its sender over the rate limit or a daily
quota. Untriggered group messages are kept as context and never count against either;
admins and the console are exempt from both. Every answer leaves through the one door
out; `_answer` is the one place a command's `Reply` becomes an outbound message.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from core.admins import Admins
from core.messages import ChatType, InboundMessage, Reply, TryLater
from core.turn.accepted import notice_for
from core.turn.access import AccessRules, ChatRules, NothingSet
from core.turn.arrivals import Arrivals, Ticket
from core.turn.chime import ChimeLevel, chime_level
from core.turn.chiming import ChimeIn
from core.turn.delivery import Outbox
from core.turn.outcomes import GENERIC_APOLOGY, Overloaded, ShuttingDown
from core.turn.processor import MessageProcessor
from core.turn.ratelimit import RATE_NOTICE, RateDecision, RateLimiter
from core.turn.triggers import TriggerPolicy, is_command
from core.usage.quota import ALLOWED as QUOTA_OK
from core.usage.quota import QuotaDecision, QuotaGuard
from memory.chats.types import ChatKey

log = logging.getLogger(__name__)

RETRY_AFTER_S = 10.0  # what a caller is told to wait during a restart
OVERLOAD_RETRY_S = 2.0  # ... and when too many turns are in flight and waiting
_ALLOWED = RateDecision(True)
# A group voice note's transcript (None: none), for its wake-word check (core/media/).
Hear = Callable[[InboundMessage], Awaitable[str | None]]
VOICE_WAKE_WORDS = 4  # a voice note calls the bot when a wake word is among its first words
# What a private sender is told when a channel could read nothing of their message.
UNREADABLE_NOTICE = (
    "I can read text, photos, documents and voice notes; I can't open this kind of message yet."
)
# Sent before the answer when the channel cut an over-long message (`text_cut_at`).
TEXT_CUT_NOTICE = "Your message was too long for me: I read only its first {limit} characters."


Verdict = Literal["ignore", "context", "follow", "notice", "command", "model"]


@dataclass(frozen=True)
class Decision:
    """What the policy decided for one message: ignore it, keep it as group context,
    send a notice instead (rate limit, quota), run the command, or ask the model."""

    verdict: Verdict
    notice: str | None = None  # for "notice": the line to send

    @property
    def answers(self) -> bool:
        """The bot is making an answer (a channel may show "typing…")."""
        return self.verdict in ("command", "model")


IGNORE = Decision("ignore")


class CommandTable(Protocol):
    """The chat commands (bot/commands/table.py): one command message in, its answer out;
    each command checks its own permission."""

    async def handle(self, message: InboundMessage) -> Reply: ...


class Moderator(Protocol):
    """A group's moderation rules (core/moderation/engine.py), seen by every message first;
    True: the message goes no further (a member joined, or it was deleted)."""

    async def observe(self, message: InboundMessage) -> bool: ...


class ChatSettingsSource(Protocol):
    """A group's stored settings, read through a short cache
    (memory.chats.settings_cache.CachedChatSettings)."""

    async def get(self, key: ChatKey) -> ChatRules: ...


class Gate:
    """The MessageHandler every channel calls. Never raises: a failure is an apology."""

    def __init__(
        self,
        *,
        processor: MessageProcessor,
        commands: CommandTable,
        outbox: Outbox,
        policy: TriggerPolicy,
        store_untriggered: bool,
        admins: Admins,
        limiter: RateLimiter | None = None,
        access: AccessRules | None = None,
        chat_settings: ChatSettingsSource | None = None,
        quota: QuotaGuard | None = None,
        hear: Hear | None = None,
        chime: ChimeIn | None = None,
        chime_in: ChimeLevel = "off",
        moderation: Moderator | None = None,
    ) -> None:
        """`outbox` is where answers go out. `limiter` counts answered messages per
        sender (None: no limit); `quota` checks the daily token allowances (None: none);
        `admins` and the console are exempt from both. `access` decides where the bot
        serves (None: everywhere), with each group's `chat_settings` (None: defaults).
        `chime` may speak up after a group message kept as context, at the group's
        `/bot chime` level, else `chime_in`."""
        self._admins = admins
        self._chime = chime
        self._chime_in = chime_in
        self._processor = processor
        self._commands = commands
        self._policy = policy
        self._hear = hear
        self._store_untriggered = store_untriggered
        self._arrivals = Arrivals()
        self._limiter = limiter
        self._access = access
        self._chat_settings = chat_settings
        self._quota = quota
        self._outbox = outbox
        self._moderation = moderation

    @property
    def policy(self) -> TriggerPolicy:
        """The one trigger policy."""
        return self._policy

    async def __call__(self, message: InboundMessage) -> None:
        """Answer `message` (or not) through the outbox. Raises only TryLater: the
        message is kept and answered after the restart."""
        ticket = self._arrivals.ticket((message.chat_key, message.sender_key))  # no await yet
        try:
            await ticket.wait()
            if await self._moderated(message):
                return
            decision = await self.decide(message)
            if decision.answers and message.text_cut_at is not None:
                cut = TEXT_CUT_NOTICE.format(limit=message.text_cut_at)
                await self._answer(message, Reply(cut))
            reply = await self._act(message, decision, ticket)
        except TryLater:
            raise
        except Exception:
            log.exception("turn failed in %s", message.chat_key)
            reply = Reply(GENERIC_APOLOGY)
        finally:
            ticket.release()
        if reply is not None:
            await self._answer(message, reply)

    async def _answer(self, message: InboundMessage, reply: Reply) -> None:
        """The one place a command's `Reply` (or a notice) becomes an outbound message."""
        if not reply.text.strip():
            return
        outbound = notice_for(message, reply.text, private=reply.private)
        if reply.choices or reply.settles:
            settles = message.reply_to_message_id if reply.settles else None
            outbound = replace(outbound, choices=reply.choices, settles=settles)
        await self._outbox.tell(outbound)

    async def decide(self, message: InboundMessage) -> Decision:
        """The ladder, once per message (it counts against the rate limit): access,
        trigger, rate limit, quota. Everything after, the channel's "typing…"
        included, follows from this one decision."""
        empty = not message.text.strip() and not message.images and not message.attachments
        if empty and not message.unreadable:
            return IGNORE
        command = is_command(message.text)
        here = await self._settings_of(message)
        refused = self._refusal(message, here, command)
        if refused is not None:
            log.debug("not serving %s in %s: %s", message.sender_key, message.chat_key, refused)
            return IGNORE
        if empty:  # unreadable: a private sender is told so (within the rate limit)
            private = message.chat_type is ChatType.PRIVATE
            told = private and self._rate_check(message).allowed
            return Decision("notice", UNREADABLE_NOTICE) if told else IGNORE
        if (
            not command
            and not self._policy.triggers(message, here.wake_words)
            and not await self._spoken_wake_word(message, here)
        ):
            if message.chat_type is ChatType.GROUP and self._processor.gathering(message):
                return Decision("follow")  # its sender called the bot a moment ago
            if self._store_untriggered and message.chat_type is ChatType.GROUP:
                return Decision("context")
            return IGNORE
        rate = self._rate_check(message)
        if not rate.allowed:
            log.info(
                "user %s over the rate limit in %s; not answered",
                message.sender_key,
                message.chat_key,
            )
            return Decision("notice", RATE_NOTICE) if rate.notify else IGNORE
        if command:
            return Decision("command")
        quota = await self._quota_check(message)
        if not quota.allowed:
            return Decision("notice", quota.notice) if quota.notice else IGNORE
        return Decision("model")

    async def _act(
        self, message: InboundMessage, decision: Decision, ticket: Ticket
    ) -> Reply | None:
        """Do what was decided: a Reply to send back, or None (sent already, or silence).
        While an answer is being made the channel shows it ("typing…"), from the
        same decision. The sender's next message is decided once this one is accepted
        (in a burst: once its burst is open), not after its answer."""
        if decision.verdict == "follow" and await self._processor.join_burst(message):
            return None  # answered with the burst it joined
        if decision.verdict == "follow" and not self._store_untriggered:
            return None
        if decision.verdict in ("context", "follow"):
            await self._processor.remember_context(message)
            await self._maybe_chime(message)
            return None
        if decision.verdict == "notice":
            return Reply(decision.notice or "")
        if not decision.answers:
            return None
        async with self._outbox.working(message):
            if decision.verdict == "command":
                ticket.release()
                return await self._commands.handle(message)
            try:
                await self._processor.handle(message, accepted=ticket.release)
            except ShuttingDown:
                raise TryLater(RETRY_AFTER_S) from None
            except Overloaded:  # nothing was stored: the caller sends it again later
                raise TryLater(OVERLOAD_RETRY_S) from None
        return None

    async def _moderated(self, message: InboundMessage) -> bool:
        """The group's rules (no model call); a member's joining stops here. A failure is
        logged: nobody asked, and the message still gets its answer."""
        if self._moderation is None:
            return message.joined
        try:
            return await self._moderation.observe(message)
        except Exception:
            log.exception("moderation failed in %s", message.chat_key)
            return message.joined

    async def _maybe_chime(self, message: InboundMessage) -> None:
        """A decision (rarely a message) within the chime-in budget. Nobody asked, so a
        failure here is logged and never answered with an apology."""
        if self._chime is None:
            return
        try:
            here = await self._settings_of(message)
            await self._chime.heard(message, chime_level(here.chime, self._chime_in))
        except Exception:
            log.exception("chime-in failed in %s", message.chat_key)

    async def _spoken_wake_word(self, message: InboundMessage, here: ChatRules) -> bool:
        """A group voice note that starts with a wake word calls the bot (transcribed
        once; the transcript is cached, so answering it costs no second call)."""
        if self._hear is None or message.chat_type is not ChatType.GROUP:
            return False
        if not any(a.kind == "voice" for a in message.attachments):
            return False
        if await self._over_quota(message):
            return False  # past the allowance nobody pays for a transcript to be ignored
        heard = await self._hear(message)
        if not heard:
            return False
        opening = " ".join(heard.split()[:VOICE_WAKE_WORDS])
        return self._policy.has_wake_word(opening, here.wake_words)

    def _refusal(self, message: InboundMessage, here: ChatRules, command: bool) -> str | None:
        """Why the bot does not serve this message in this chat, or None when it does."""
        if self._access is None:
            return None
        admission = self._access.admit(message, here, command=command)
        return None if admission.allowed else admission.why

    async def _settings_of(self, message: InboundMessage) -> ChatRules:
        """A group's stored settings (cached); private chats need none here."""
        if self._chat_settings is None or message.chat_type is not ChatType.GROUP:
            return NothingSet(message.chat_key)
        return await self._chat_settings.get(message.chat_key)

    async def _over_quota(self, message: InboundMessage) -> bool:
        """Past a daily allowance (no notice asked for: this decides nothing alone)."""
        if self._quota is None or self._quota_exempt(message):
            return False
        return await self._quota.over(message) is not None

    def _quota_exempt(self, message: InboundMessage) -> bool:
        return self._admins.operator(message) or self._admins.here(message)

    async def _quota_check(self, message: InboundMessage) -> QuotaDecision:
        """Over a daily allowance the message is not accepted (not stored, no model
        call); the sender gets the notice or, within the hour, silence."""
        if self._quota is None or self._quota_exempt(message):
            return QUOTA_OK
        decision = await self._quota.check(message)
        if not decision.allowed:
            log.info(
                "%s over the %s token quota in %s; not answered",
                message.sender_key,
                decision.over,
                message.chat_key,
            )
        return decision

    def _rate_check(self, message: InboundMessage) -> RateDecision:
        """Synchronous on purpose: a refusal returns before the channel shows "typing"."""
        if self._limiter is None or self._admins.operator(message) or self._admins.here(message):
            return _ALLOWED
        return self._limiter.check(message.sender_key)
