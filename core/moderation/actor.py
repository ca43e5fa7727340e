"""Taking an action exactly once: record it under its key, then ask the platform once.

Why record first: a process killed between the platform call and any later write would
otherwise take the action again after its restart. Recorded first, a kill leaves a
`started` row, and the key refuses a second record, so the action is at most once; the
log shows the row that never finished. A platform that refuses for want of rights is told
to the group in one plain line and never asked again for that action.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from core.inject import clean_name
from core.messages import OutboundMessage
from core.moderation.platform import ActionFailed, NoRights, PlatformAction, Platforms
from memory.moderation.types import ActionDraft, ModerationStore

log = logging.getLogger(__name__)

_VERBS = {"delete": "delete that message", "mute": "mute {name}", "kick": "remove {name}"}
NO_RIGHTS = "I can't {what} here: I don't have the rights in this group (make me an admin)."
WARNING = "{name}, please keep to the group's rules: {reason}"


class Tell(Protocol):
    """The one door out (core.turn.delivery.Outbox.tell)."""

    async def tell(self, outbound: OutboundMessage) -> bool: ...


@dataclass(frozen=True)
class Actor:
    store: ModerationStore
    platforms: Platforms
    outbox: Tell

    async def take(self, draft: ActionDraft) -> str:
        """Record, then act once. The outcome: "done", "no_rights", "failed" or "repeat"
        (recorded already: nothing is done)."""
        action = await self.store.begin(draft)
        if action is None:
            return "repeat"
        name = clean_name(draft.user_name, draft.user_id)
        kind = draft.penalty.kind
        if kind in ("warn", "none"):
            if kind == "warn":
                line = WARNING.format(name=name, reason=draft.reason or draft.source)
                await self._say(draft, line)
            await self.store.end(action.id, "done")
            return "done"
        channel = self.platforms.of(draft.platform)
        try:
            if channel is None:
                raise ActionFailed(f"no {draft.platform} channel that moderates")
            await channel.moderate(
                PlatformAction(
                    kind, draft.chat_id, draft.user_id, draft.message_id, draft.penalty.seconds
                )
            )
        except NoRights as exc:
            await self.store.end(action.id, "no_rights", str(exc))
            log.info("moderation: no rights to %s in %s:%s", kind, draft.platform, draft.chat_id)
            await self._say(draft, NO_RIGHTS.format(what=_VERBS[kind].format(name=name)))
            return "no_rights"
        except ActionFailed as exc:
            await self.store.end(action.id, "failed", str(exc))
            log.warning(
                "moderation: %s in %s:%s failed: %s", kind, draft.platform, draft.chat_id, exc
            )
            return "failed"
        await self.store.end(action.id, "done")
        log.info(
            "moderation: %s %s in %s:%s (%s)",
            kind,
            draft.user_id,
            draft.platform,
            draft.chat_id,
            draft.source,
        )
        return "done"

    async def _say(self, draft: ActionDraft, text: str) -> None:
        await self.outbox.tell(OutboundMessage(draft.platform, draft.chat_id, text, plain=True))
