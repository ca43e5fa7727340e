"""A group's moderation rules, its action log and the proposals the model made, as the
core sees them (plain records; no storage library here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

# What a rule or an approved proposal does to a member (core/moderation/ names each).
ACTION_KINDS = ("none", "warn", "delete", "mute", "kick")
# A logged action's end: taken, refused by the platform for want of rights, or failed.
ACTION_STATES = ("started", "done", "no_rights", "failed")
PROPOSAL_STATES = ("open", "approved", "declined")


@dataclass(frozen=True)
class Penalty:
    """What is done to a member: `kind` with `seconds` for a mute."""

    kind: str
    seconds: int = 0

    def label(self) -> str:
        return f"mute {self.seconds // 60}m" if self.kind == "mute" else self.kind

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "seconds": self.seconds}

    @classmethod
    def of(cls, value: Any) -> Penalty | None:
        if not isinstance(value, dict) or value.get("kind") not in ACTION_KINDS:
            return None
        return cls(str(value["kind"]), int(value.get("seconds") or 0))


@dataclass(frozen=True)
class Flood:
    """More than `count` messages within `seconds` from one member: `penalty`."""

    count: int
    seconds: int
    penalty: Penalty


@dataclass(frozen=True)
class GroupRules:
    """One group's rules; the defaults are "nothing on"."""

    welcome: str | None = None
    replies: dict[str, str] = field(default_factory=dict)  # keyword (casefolded) -> answer
    flood: Flood | None = None
    links: Penalty | None = None
    rules: str | None = None  # the text a reported message is judged against

    @property
    def active(self) -> bool:
        return bool(self.welcome or self.replies or self.flood or self.links)

    def as_json(self) -> dict[str, Any]:
        flood = self.flood
        return {
            "welcome": self.welcome,
            "replies": dict(self.replies),
            "flood": (
                {"count": flood.count, "seconds": flood.seconds, **flood.penalty.as_json()}
                if flood
                else None
            ),
            "links": self.links.as_json() if self.links else None,
            "rules": self.rules,
        }

    @classmethod
    def of(cls, value: Any) -> GroupRules:
        if not isinstance(value, dict):
            return cls()
        flood, penalty = value.get("flood"), Penalty.of(value.get("flood"))
        replies = value.get("replies")
        return cls(
            welcome=value.get("welcome") or None,
            replies={str(k): str(v) for k, v in replies.items()}
            if isinstance(replies, dict)
            else {},
            flood=(
                Flood(int(flood["count"]), int(flood["seconds"]), penalty)
                if isinstance(flood, dict) and penalty is not None
                else None
            ),
            links=Penalty.of(value.get("links")),
            rules=value.get("rules") or None,
        )


@dataclass(frozen=True)
class ModAction:
    """One logged action: recorded (`started`) before the platform is asked, then its end."""

    id: int
    platform: str
    chat_id: str
    key: str  # unique in its chat: the same action is never recorded, so never taken, twice
    user_id: str
    user_name: str
    kind: str
    seconds: int
    message_id: str | None
    reason: str
    source: str  # the rule ("flood", "links", ...) or "approved by <admin>"
    state: str
    created_at: datetime


@dataclass(frozen=True)
class ActionDraft:
    platform: str
    chat_id: str
    key: str
    user_id: str
    user_name: str
    penalty: Penalty
    message_id: str | None
    reason: str
    source: str


@dataclass(frozen=True)
class Proposal:
    """What the model proposed for a reported message; nothing happens until an admin's yes."""

    id: int
    platform: str
    chat_id: str
    reporter_id: str
    user_id: str
    user_name: str
    message_id: str | None
    text: str
    kind: str
    seconds: int
    reason: str
    state: str
    decided_by: str | None
    created_at: datetime

    @property
    def penalty(self) -> Penalty:
        return Penalty(self.kind, self.seconds)


class ModerationStore(Protocol):
    """The moderation tables (memory/moderation/store.py)."""

    async def rules(self, platform: str, chat_id: str) -> GroupRules: ...

    async def all_rules(self) -> list[tuple[str, str, GroupRules]]: ...

    async def set_rules(self, platform: str, chat_id: str, rules: GroupRules, by: str) -> None: ...

    async def begin(self, draft: ActionDraft) -> ModAction | None:
        """Record an action before it is taken; None when its key was recorded already."""

    async def end(self, action_id: int, state: str, detail: str = "") -> None: ...

    async def log(self, platform: str, chat_id: str, limit: int = 10) -> list[ModAction]: ...

    async def joined(self, platform: str, chat_id: str, user_id: str, at: datetime) -> None: ...

    async def joined_at(self, platform: str, chat_id: str, user_id: str) -> datetime | None: ...

    async def propose(self, draft: Proposal) -> Proposal: ...

    async def proposal(self, platform: str, chat_id: str, proposal_id: int) -> Proposal | None: ...

    async def decide(self, proposal_id: int, state: str, by: str) -> bool:
        """Move an open proposal to `state`; False when it was decided already."""
