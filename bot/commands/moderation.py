"""`/mod`: a group's moderation rules, reports and the action log (core/moderation/).

Everyone may `/mod report` (as an answer to the message) and `/mod rules` to read them;
everything else is for admins (the one admin decision, core/admins.py, with the group's own
owner and admins when `[moderation] group_admins` is on). Every input is bounded and a bad
one gets the usage line naming the limit.
"""

from __future__ import annotations

import re
from dataclasses import replace

from bot.commands.table import text_after
from core.inject import clean_name
from core.messages import ChatType, InboundMessage, Reply
from core.moderation.engine import Moderation
from memory.moderation.types import Flood, GroupRules, Penalty

MAX_REPLIES = 100
MAX_ANSWER = 1000
MAX_KEYWORD = 100
MAX_TEXT = 2000  # a welcome, the rules
MAX_MUTE_MINUTES = 43200  # 30 days, the longest both platforms take
LOG_LINES = 10
USAGE = (
    "Usage: /mod welcome <text with {name}>|off · /mod reply <keyword> => <answer> "
    "(/mod reply lists, /mod reply remove <keyword>) · /mod flood <count>/<seconds>s "
    "warn|delete|mute <N>m|kick (or off) · /mod links delete|mute <N>m|off · "
    "/mod rules [text] · /mod report (as an answer) · /mod approve|decline <id> · /mod log"
)
FLOOD_USAGE = (
    "Usage: /mod flood <count>/<seconds>s <action>, e.g. /mod flood 5/10s mute 10m "
    "(or /mod flood off)"
)
MEMBER = "Only the group's admins can change its moderation."
_FLOOD = re.compile(r"^(\d{1,4})/(\d{1,5})s$")


def penalty_of(words: list[str], allowed: tuple[str, ...]) -> Penalty | str:
    """`warn`, `delete`, `mute 10m`, `kick` -> Penalty; else the line saying what is wrong."""
    if not words:
        return f"Name the action: {', '.join(allowed)}."
    kind = words[0].casefold()
    if kind not in allowed:
        return f"Unknown action {words[0]!r}: use one of {', '.join(allowed)}."
    if kind != "mute":
        return Penalty(kind) if len(words) == 1 else f"{kind} takes nothing after it."
    found = re.fullmatch(r"(\d{1,6})m", words[1]) if len(words) == 2 else None
    if found is None:
        return "Usage: mute <N>m, e.g. mute 10m."
    minutes = int(found.group(1))
    if not 1 <= minutes <= MAX_MUTE_MINUTES:
        return f"A mute lasts 1 to {MAX_MUTE_MINUTES} minutes (30 days)."
    return Penalty("mute", minutes * 60)


def choices_for(proposal_id: int) -> tuple[tuple[str, str], ...]:
    """The proposal's buttons (Telegram): each is the command an admin would type."""
    return (
        ("Approve", f"/mod approve {proposal_id}"),
        ("Decline", f"/mod decline {proposal_id}"),
    )


class ModCommand:
    """The `/mod` handler."""

    def __init__(self, moderation: Moderation) -> None:
        self._mod = moderation

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        if message.chat_type is not ChatType.GROUP:
            return Reply("Moderation works in groups: send /mod there.")
        sub = args[0].casefold() if args else ""
        if sub == "report":
            line, open_id = await self._mod.report(message)
            return Reply(line, choices=choices_for(open_id) if open_id is not None else ())
        if sub == "rules" and len(args) == 1:
            rules = await self._mod.rules(message.platform, message.chat_id)
            return Reply(f"This group's rules:\n{rules.rules}" if rules.rules else "No rules set.")
        if sub not in ("welcome", "reply", "flood", "links", "rules", "approve", "decline", "log"):
            return Reply(USAGE)
        if not await self._mod.admins.confirmed(message):
            return Reply(MEMBER)
        if sub in ("approve", "decline"):
            if len(args) != 2 or not args[1].lstrip("#").isdigit():
                return Reply(f"Usage: /mod {sub} <id>")
            line, decided = await self._mod.decide(
                message, int(args[1].lstrip("#")), sub == "approve"
            )
            return Reply(line, settles=decided)
        if sub == "log":
            return Reply(await self._log(message))
        rules = await self._mod.rules(message.platform, message.chat_id)
        changed = self._change(sub, args[1:], text_after(message.text, 2), rules)
        if isinstance(changed, str):
            return Reply(changed)
        new_rules, line = changed
        if new_rules is not rules:
            await self._mod.set_rules(message, new_rules)
        return Reply(line)

    def _change(
        self, sub: str, args: list[str], rest: str, rules: GroupRules
    ) -> tuple[GroupRules, str] | str:
        if sub == "welcome":
            if not rest:
                return f"Welcome: {rules.welcome}" if rules.welcome else "No welcome set."
            if rest.casefold() == "off":
                return replace(rules, welcome=None), "Welcome off."
            if len(rest) > MAX_TEXT:
                return f"A welcome is at most {MAX_TEXT} characters."
            return replace(rules, welcome=rest), "Welcome set."
        if sub == "rules":
            if len(rest) > MAX_TEXT:
                return f"The rules are at most {MAX_TEXT} characters."
            return replace(rules, rules=rest), "Rules set."
        if sub == "reply":
            return self._reply(args, rest, rules)
        if sub == "flood":
            if args and args[0].casefold() == "off":
                return replace(rules, flood=None), "Flood rule off."
            found = _FLOOD.match(args[0]) if args else None
            if found is None:
                return FLOOD_USAGE
            count, seconds = int(found.group(1)), int(found.group(2))
            if not (1 <= count <= 1000 and 1 <= seconds <= 3600):
                return "Flood: a count of 1 to 1000 messages within 1 to 3600 seconds."
            penalty = penalty_of(args[1:], ("warn", "delete", "mute", "kick"))
            if isinstance(penalty, str):
                return penalty
            flood = Flood(count, seconds, penalty)
            line = f"Flood rule: more than {count} messages in {seconds}s → {penalty.label()}."
            return replace(rules, flood=flood), line
        # links
        if args and args[0].casefold() == "off":
            return replace(rules, links=None), "Links rule off."
        penalty = penalty_of(args, ("delete", "mute"))
        if isinstance(penalty, str):
            return penalty
        line = f"Links from members who joined recently: {penalty.label()}."
        return replace(rules, links=penalty), line

    def _reply(self, args: list[str], rest: str, rules: GroupRules) -> tuple[GroupRules, str] | str:
        if not args:
            if not rules.replies:
                return "No keyword answers. Add one: /mod reply <keyword> => <answer>"
            listed = [f"{k} => {v[:60]}" for k, v in rules.replies.items()]
            return "\n".join(listed)
        replies = dict(rules.replies)
        if args[0].casefold() == "remove" and "=>" not in rest:
            keyword = rest.partition(" ")[2].strip().casefold()
            if replies.pop(keyword, None) is None:
                return f"No keyword answer for {keyword!r}."
            return replace(rules, replies=replies), f"Removed {keyword!r}."
        keyword, arrow, answer = (part.strip() for part in rest.partition("=>"))
        if not arrow or not keyword or not answer:
            return "Usage: /mod reply <keyword> => <answer>"
        if len(keyword) > MAX_KEYWORD:
            return f"A keyword is at most {MAX_KEYWORD} characters."
        if len(answer) > MAX_ANSWER:
            return f"An answer is at most {MAX_ANSWER} characters."
        keyword = keyword.casefold()
        if keyword not in replies and len(replies) >= MAX_REPLIES:
            return f"A group has at most {MAX_REPLIES} keyword answers; remove one first."
        replies[keyword] = answer
        return replace(rules, replies=replies), f"Keyword answer for {keyword!r} set."

    async def _log(self, message: InboundMessage) -> str:
        actions = await self._mod.store.log(message.platform, message.chat_id, LOG_LINES)
        if not actions:
            return "No moderation actions in this group yet."
        lines = []
        for a in actions:
            what = Penalty(a.kind, a.seconds).label()
            who = clean_name(a.user_name, a.user_id)
            state = "" if a.state == "done" else f" [{a.state.replace('_', ' ')}]"
            lines.append(
                f"#{a.id} {a.created_at:%Y-%m-%d %H:%M} {what} {who}: {a.reason} "
                f"({a.source}){state}"
            )
        return "\n".join(lines)
