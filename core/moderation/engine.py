"""The rules that cost no model call, run on every group message at the gate: welcome,
keyword answers, flood, newcomers' links; and reports, judged by the model, turned into
proposals that act only after an admin's approve.

Why at the gate: every message passes there once, before the trigger decision, so a rule
sees messages nobody addressed to the bot, and a deleted message is never answered.
Rules are read through a short cache (a write through `/mod` clears its group's entry
at once; other replicas see it within `RULES_TTL_S`).
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cachetools import LRUCache, TTLCache

from core.admins import Admins
from core.inject import clean_name
from core.llm.errors import LLMError
from core.llm.provider import LLMProvider
from core.messages import ChatType, InboundMessage, message_to
from core.moderation.actor import Actor
from core.moderation.judge import request, verdict
from core.turn.accepted import notice_for
from memory.moderation.types import ActionDraft, GroupRules, ModerationStore, Penalty, Proposal

log = logging.getLogger(__name__)

RULES_TTL_S = 30.0
REPLY_EVERY_S = 60.0  # the same keyword answer at most once a minute in a group
LINK = re.compile(
    r"(?i)\b(?:https?://|www\.)\S+|\b[a-z0-9-]+\.(?:com|net|org|cn|io|me|xyz|top|cc|ru)\b"
)
MAX_SENDERS = 20000  # flood counters kept (least recent forgotten)


@dataclass(frozen=True)
class ModerationOptions:
    group_admins: bool = True
    new_member_hours: float = 24.0
    report_tokens: int = 200


class Moderation:
    """`observe(message)` for every inbound message; the `/mod` command's services."""

    def __init__(
        self,
        store: ModerationStore,
        actor: Actor,
        admins: Admins,
        *,
        model: LLMProvider | None = None,
        options: ModerationOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.actor = actor
        self.admins = admins
        self._model = model
        self._options = options or ModerationOptions()
        self._clock = clock
        self._rules: TTLCache[tuple[str, str], GroupRules] = TTLCache(4096, RULES_TTL_S)
        self._said: LRUCache[tuple[str, str, str], float] = LRUCache(4096)
        self._seen: LRUCache[tuple[str, str, str], deque[float]] = LRUCache(MAX_SENDERS)

    async def rules(self, platform: str, chat_id: str) -> GroupRules:
        key = (platform, chat_id)
        found = self._rules.get(key)
        if found is None:
            found = self._rules[key] = await self.store.rules(platform, chat_id)
        return found

    async def set_rules(self, message: InboundMessage, rules: GroupRules) -> None:
        await self.store.set_rules(message.platform, message.chat_id, rules, message.sender_key)
        self._rules[(message.platform, message.chat_id)] = rules

    async def observe(self, message: InboundMessage) -> bool:
        """Apply the group's rules; True when the message goes no further (a member
        joined, or the message was deleted or its sender removed)."""
        if message.chat_type is not ChatType.GROUP:
            return message.joined
        if message.joined:
            await self._joined(message)
            return True
        rules = await self.rules(message.platform, message.chat_id)
        if not rules.active:
            return False
        if rules.replies:
            await self._keyword(message, rules)
        if rules.flood is not None and await self._flooding(message, rules):
            return rules.flood.penalty.kind in ("delete", "kick", "mute")
        if rules.links is not None and LINK.search(message.text) and await self._newcomer(message):
            if not await self.admins.confirmed(message):
                await self._act(message, rules.links, "links", "a link from a new member")
                return rules.links.kind in ("delete", "kick", "mute")
        return False

    async def _joined(self, message: InboundMessage) -> None:
        await self.store.joined(message.platform, message.chat_id, message.sender_id, _utc(message))
        rules = await self.rules(message.platform, message.chat_id)
        if rules.welcome:
            name = clean_name(message.sender_name, message.sender_id)
            text = rules.welcome.replace("{name}", name)
            await self.actor.outbox.tell(message_to(message, text, plain=True))

    async def _keyword(self, message: InboundMessage, rules: GroupRules) -> None:
        if message.text.lstrip().startswith("/"):
            return  # a command (`/mod reply ...` names the keyword) is not a question
        text = message.text.casefold()
        for keyword, answer in rules.replies.items():
            if keyword in text:
                key, now = (message.platform, message.chat_id, keyword), self._clock()
                last = self._said.get(key)
                if last is None or now - last >= REPLY_EVERY_S:
                    self._said[key] = now
                    await self.actor.outbox.tell(notice_for(message, answer))
                return  # at most one keyword answer per message

    async def _flooding(self, message: InboundMessage, rules: GroupRules) -> bool:
        flood = rules.flood
        assert flood is not None
        key, now = (message.platform, message.chat_id, message.sender_id), self._clock()
        seen = self._seen.get(key)
        if seen is None:
            seen = self._seen[key] = deque(maxlen=flood.count + 1)
        seen.append(now)
        while seen and now - seen[0] > flood.seconds:
            seen.popleft()
        if len(seen) <= flood.count:
            return False
        seen.clear()  # acted on once; counting starts again
        if await self.admins.confirmed(message):
            return False
        why = f"more than {flood.count} messages in {flood.seconds}s"
        await self._act(message, flood.penalty, "flood", why)
        return True

    async def _newcomer(self, message: InboundMessage) -> bool:
        joined = await self.store.joined_at(message.platform, message.chat_id, message.sender_id)
        if joined is None:
            return False
        return _utc(message) - joined < timedelta(hours=self._options.new_member_hours)

    async def _act(self, message: InboundMessage, penalty: Penalty, rule: str, why: str) -> str:
        return await self.actor.take(
            ActionDraft(
                platform=message.platform,
                chat_id=message.chat_id,
                key=f"{rule}:{message.message_id or message.timestamp.isoformat()}",
                user_id=message.sender_id,
                user_name=message.sender_name,
                penalty=penalty,
                message_id=message.message_id,
                reason=why,
                source=rule,
            )
        )

    # -- reports -------------------------------------------------------------------------

    async def report(self, message: InboundMessage) -> tuple[str, int | None]:
        """Judge the message `message` replies to: the proposal's line (nothing is done)
        and the id of the proposal left open for an admin, if any."""
        if message.reply_to_sender_id is None or not (message.reply_text or "").strip():
            return "Answer the message you report with /mod report.", None
        if self._model is None:
            return "Reports need a model, and none is configured.", None
        rules = await self.rules(message.platform, message.chat_id)
        name = message.reply_to_sender_id
        messages = request(rules.rules, name, message.reply_text or "")
        try:
            result = await self._model.chat(messages, max_tokens=self._options.report_tokens)
        except LLMError as exc:
            log.warning("report in %s not judged: %s", message.chat_key, exc.kind)
            return "I couldn't review that message just now; try again later.", None
        penalty, reason = verdict(result.text or "")
        proposal = await self.store.propose(
            Proposal(
                id=0,
                platform=message.platform,
                chat_id=message.chat_id,
                reporter_id=message.sender_id,
                user_id=message.reply_to_sender_id,
                user_name=name,
                message_id=message.reply_to_message_id,
                text=message.reply_text or "",
                kind=penalty.kind,
                seconds=penalty.seconds,
                reason=reason,
                state="open" if penalty.kind != "none" else "declined",
                decided_by=None if penalty.kind != "none" else "model",
                created_at=_utc(message),
            )
        )
        if penalty.kind == "none":
            return f"Report #{proposal.id}: no action proposed. {reason}".strip(), None
        line = (
            f"Proposal #{proposal.id}: {penalty.label()} for {name}: "
            f"{reason or 'no reason given'}. "
            f"Nothing happens until an admin answers /mod approve {proposal.id} "
            f"(or /mod decline {proposal.id})."
        )
        return line, proposal.id

    async def decide(
        self, message: InboundMessage, proposal_id: int, approve: bool
    ) -> tuple[str, bool]:
        """An admin's answer to a proposal (the caller checked the admin); acts once.
        The line, and whether the proposal is decided now (by this answer or before)."""
        found = await self.store.proposal(message.platform, message.chat_id, proposal_id)
        if found is None:
            return f"There is no proposal #{proposal_id} in this group.", False
        if found.state != "open":
            return f"Proposal #{proposal_id} was {found.state} already.", True
        if approve and await self.admins.confirmed(message, found.user_id):
            return f"Proposal #{proposal_id}: I don't act on an admin.", False
        state = "approved" if approve else "declined"
        if not await self.store.decide(proposal_id, state, message.sender_key):
            return f"Proposal #{proposal_id} was decided already.", True
        if not approve:
            return f"Proposal #{proposal_id} declined; nothing was done.", True
        outcome = await self.actor.take(
            ActionDraft(
                platform=found.platform,
                chat_id=found.chat_id,
                key=f"proposal:{found.id}",
                user_id=found.user_id,
                user_name=found.user_name,
                penalty=found.penalty,
                message_id=found.message_id,
                reason=found.reason,
                source=f"approved by {clean_name(message.sender_name, message.sender_key)}",
            )
        )
        if outcome == "done":
            return f"Proposal #{proposal_id} approved: {found.penalty.label()} done.", True
        line = f"Proposal #{proposal_id} approved; it could not be carried out ({outcome})."
        return line, True


def _utc(message: InboundMessage) -> datetime:
    when = message.timestamp
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
