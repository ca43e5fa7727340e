"""`/bot ...`: an admin controls the chat they type it in, at run time.

`/bot on|off`, `/bot allow|deny`, `/bot chime off|low|normal` (groups),
`/bot persona <text>`, `/bot wake <word>`,
`/bot reset-settings`, `/bot status`. Why these live in the database and not in the
config: an operator opens a group or gives it a persona from the chat itself, and the
change survives a restart and reaches every replica. This module only changes the
settings and explains them.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.commands.table import text_after
from bot.config import Settings
from core.messages import ChatType, InboundMessage, Reply
from core.turn.access import AccessRules
from core.turn.chime import DEFAULT_GAP_S, ChimeLevel, chime_level
from memory.chats.settings import (
    CHIME_LEVELS,
    PERSONA_MAX_CHARS,
    WAKE_WORD_MAX_CHARS,
    ChatSettings,
    ChatSettingsError,
    check_wake_word,
)
from memory.chats.settings_cache import CachedChatSettings

PERSONA_CLEAR = ("reset", "clear")  # either word removes the chat's persona line
PERSONA_USAGE = (
    f"/bot persona <text> — this chat's persona (at most {PERSONA_MAX_CHARS} characters); "
    "/bot persona reset removes it"
)
USAGE = "\n".join(
    [
        "Usage (admins): /bot status — what applies here",
        "/bot on | /bot off — answer in this group, or stay silent and stop reading it",
        "/bot allow | /bot deny — serve this group, or ignore it",
        "/bot chime off|low|normal — may I speak up here when nobody asked (rarely / more "
        "often); /bot chime default — back to [groups] chime_in",
        PERSONA_USAGE,
        f"/bot wake <word> — one more wake word for this group (at most {WAKE_WORD_MAX_CHARS} "
        "characters); /bot wake -<word> removes it; /bot wake lists them",
        "/bot reset-settings — persona and wake words back to the defaults",
        "/bot timezone <Zone> — this chat's time zone for reminders (e.g. Asia/Shanghai); "
        "/bot timezone default — back to [bot] timezone",
    ]
)
GROUP_ONLY = "/bot {sub} works in a group. Private chats follow [access] private in the config."


@dataclass(frozen=True)
class BotCommand:
    """The `/bot` handler for bot/commands/table.py: (message, args) -> Reply."""

    chat_settings: CachedChatSettings
    access: AccessRules
    wake_words: tuple[str, ...]  # the bot's name and `[groups] wake_words`
    rate_limit_per_min: int
    default_timezone: str = "UTC"  # [bot] timezone: reminders in chats with none of their own
    chime_in: ChimeLevel = "off"  # [groups] chime_in: groups with no /bot chime of their own
    chime_gap_s: float = 0.0  # [groups] chime_min_gap_s (0: the level's own)

    @classmethod
    def from_settings(
        cls, settings: Settings, chat_settings: CachedChatSettings, access: AccessRules
    ) -> BotCommand:
        return cls(
            chat_settings=chat_settings,
            access=access,
            wake_words=(settings.bot.name, *settings.groups.wake_words),
            rate_limit_per_min=settings.bot.rate_limit_per_min,
            default_timezone=settings.bot.timezone,
            chime_in=settings.groups.chime_in,
            chime_gap_s=settings.groups.chime_min_gap_s,
        )

    async def __call__(self, message: InboundMessage, args: list[str]) -> Reply:
        if not self.access.admins.here(message):
            return Reply("Only admins can use /bot.")
        sub = args[0].casefold() if args else "help"
        group = message.chat_type is ChatType.GROUP
        if sub in {"on", "off", "allow", "deny", "wake", "chime"} and not group:
            return Reply(GROUP_ONLY.format(sub=sub))
        try:
            if sub == "status":
                return Reply(await self._status(message))
            if sub in {"on", "off"}:
                return Reply(await self._switch(message, on=sub == "on"))
            if sub in {"allow", "deny"}:
                return Reply(await self._allow(message, allow=sub == "allow"))
            if sub == "persona":
                return Reply(await self._persona(message, text_after(message.text, words=2)))
            if sub == "wake":
                return Reply(await self._wake(message, text_after(message.text, words=2)))
            if sub == "chime":
                return Reply(await self._chime(message, args[1].casefold() if args[1:] else ""))
            if sub == "timezone":
                return Reply(await self._timezone(message, text_after(message.text, words=2)))
            if sub == "reset-settings":
                await self.chat_settings.reset(message.chat_key, by=message.sender_key)
                return Reply("Done: this chat's persona and wake words are back to the defaults.")
        except ChatSettingsError as refused:
            return Reply(f"Not changed: {refused}.")
        return Reply(USAGE)

    async def _switch(self, message: InboundMessage, *, on: bool) -> str:
        here = await self.chat_settings.update(message.chat_key, by=message.sender_key, enabled=on)
        if not on:
            return (
                "I'm off in this group: I won't answer or keep messages here until an admin "
                "sends /bot on. Admins' commands still work."
            )
        group = self.access.group(here)
        if not group.allowed:
            return (
                f"I'm on, but this group is not served ({group.why}): send /bot allow to open it."
            )
        return "I'm on in this group again."

    async def _allow(self, message: InboundMessage, *, allow: bool) -> str:
        here = await self.chat_settings.update(
            message.chat_key, by=message.sender_key, allowed=allow
        )
        if not allow:
            return (
                "This group is denied: I ignore it from now on and keep nothing of it. "
                "Admins' commands still work; /bot allow opens it again."
            )
        if not here.enabled:
            return "This group is allowed, but I'm switched off here: send /bot on."
        return "This group is allowed: I answer here from now on."

    async def _persona(self, message: InboundMessage, text: str) -> str:
        chat = message.chat_key
        if not text:
            current = (await self.chat_settings.get(chat)).persona
            shown = f'"{current}"' if current else "none"
            return f"This chat's persona: {shown}.\n{PERSONA_USAGE}"
        if text.casefold() in PERSONA_CLEAR:
            await self.chat_settings.update(chat, by=message.sender_key, persona="")
            return "Done: this chat has no persona of its own now."
        await self.chat_settings.update(chat, by=message.sender_key, persona=text)
        return "Done: this persona applies to my answers in this chat only."

    async def _chime(self, message: InboundMessage, level: str) -> str:
        if level in {"default", "reset"}:
            level = ""
        elif level not in CHIME_LEVELS:
            here = await self.chat_settings.get(message.chat_key)
            return f"{self._chime_line(here)}\nUsage: /bot chime off|low|normal|default"
        here = await self.chat_settings.update(
            message.chat_key, by=message.sender_key, chime=level or None
        )
        return f"Done. {self._chime_line(here)}"

    def _chime_line(self, here: ChatSettings) -> str:
        level = chime_level(here.chime, self.chime_in)
        source = "/bot chime" if here.chime else "[groups] chime_in"
        if level == "off":
            return f"Chime-in: off ({source}): I speak here only when called."
        gap = self.chime_gap_s or DEFAULT_GAP_S[level]
        return (
            f"Chime-in: {level} ({source}): I may speak up unasked, at most one thought "
            f"every {gap:g} s, and mostly stay quiet."
        )

    async def _wake(self, message: InboundMessage, text: str) -> str:
        chat = message.chat_key
        if not text:
            return self._wake_words_line(await self.chat_settings.get(chat))
        removing = text.startswith("-")
        word = check_wake_word(text[1:] if removing else text)
        folded = word.casefold()
        if not removing and folded in {w.casefold() for w in self.wake_words}:
            return f"{word} is already a wake word everywhere (the config)."

        def change(current: ChatSettings) -> dict[str, object]:
            kept = [w for w in current.wake_words if w.casefold() != folded]
            if removing and len(kept) == len(current.wake_words):
                raise ChatSettingsError(f"{word} is not one of this group's wake words")
            return {"wake_words": kept if removing else [*kept, word]}

        here = await self.chat_settings.modify(chat, by=message.sender_key, change=change)
        done = f"Removed {word}." if removing else f"Added {word}."
        return f"{done} {self._wake_words_line(here)}"

    async def _timezone(self, message: InboundMessage, text: str) -> str:
        chat = message.chat_key
        if not text:
            zone = (await self.chat_settings.get(chat)).timezone
            shown = zone or f"{self.default_timezone} ([bot] timezone)"
            return f"This chat's time zone: {shown}. /bot timezone <Zone> changes it."
        zone_name = None if text.casefold() == "default" else text
        here = await self.chat_settings.update(chat, by=message.sender_key, timezone=zone_name)
        if here.timezone is None:
            return f"Done: reminders here use {self.default_timezone} ([bot] timezone)."
        return f"Done: reminders here use {here.timezone}; those already set keep their zone."

    def _wake_words_line(self, here: ChatSettings) -> str:
        own = ", ".join(here.wake_words) or "none"
        return f"Wake words: {', '.join(self.wake_words)} (config); this group's own: {own}."

    async def _status(self, message: InboundMessage) -> str:
        here = await self.chat_settings.get(message.chat_key)
        lines = [f"Here: {message.chat_key} ({message.chat_type.value} chat)."]
        if message.chat_type is ChatType.GROUP:
            group = self.access.group(here)
            served = group.allowed and here.enabled
            lines += [
                f"Access: {'allowed' if group.allowed else 'not allowed'} ({group.why}).",
                f"Bot: {'on' if here.enabled else 'off (/bot off)'}; "
                f"{'answering here' if served else 'ignoring non-admins here'}.",
                self._wake_words_line(here),
                self._chime_line(here),
            ]
        else:
            lines.append(f'Private chats: [access] private = "{self.access.private}".')
        if self.access.blocked_users:
            lines.append(f"Blocked users: {len(self.access.blocked_users)} ([access]).")
        lines.append(f'Persona: "{here.persona}".' if here.persona else "Persona: none.")
        lines.append(f"Time zone: {here.timezone or self.default_timezone + ' ([bot] timezone)'}.")
        limit = self.rate_limit_per_min
        lines.append(
            f"Rate limit: {limit} messages per user per minute (admins exempt)."
            if limit
            else "Rate limit: off."
        )
        if here.updated_by and here.updated_at is not None:
            lines.append(
                f"Last changed by {here.updated_by} at {here.updated_at:%Y-%m-%d %H:%M} UTC."
            )
        return "\n".join(lines)
