"""How fast the bot may talk in each Telegram chat: a per-chat send budget and 429 holds.

Why: Telegram allows a group about 20 messages a minute, and an edit counts like a
message. A reply that grows by editing one message every second would trip that limit
in twenty seconds, and a 429 then blocks every send to the group (the final answer
included) for up to a minute. So every send and edit to a chat takes a slot from one
budget per chat, previews leave a few slots spare for what must go out, and a 429's
`retry_after` holds the whole chat, not just the request that got it.

Time comes from an injected `Clock`, so tests run the pacing in virtual time.
"""

from __future__ import annotations

from core.clock import Clock
from core.window import SlidingWindow

GROUP_SENDS_PER_MIN = 20
WINDOW_S = 60.0
_SWEEP_OVER = 512  # chats held after a 429 before expired holds are swept


def is_group(chat_id: int) -> bool:
    """Telegram gives groups, supergroups and channels negative ids, users positive."""
    return chat_id < 0


class ChatPacer:
    """Per-chat budget of sends and edits in a sliding window, plus holds after a 429.

    The budget applies to groups (`is_group`); private chats are only held by 429s.
    Owned by one channel instance; nothing here is global.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        per_minute: int = GROUP_SENDS_PER_MIN,
        window_s: float = WINDOW_S,
    ) -> None:
        if per_minute < 1:
            raise ValueError("per_minute must be >= 1")
        self.clock = clock
        self.per_minute = per_minute
        self._uses: SlidingWindow[int] = SlidingWindow(window_s, clock=clock.monotonic)
        self._held_until: dict[int, float] = {}

    def wait_s(self, chat_id: int, *, spare: int = 0) -> float:
        """Seconds until a send to `chat_id` fits, leaving `spare` slots of the budget
        free for others (a preview leaves room for the final answer). 0: now."""
        now = self.clock.monotonic()
        wait = max(0.0, self._held_until.get(chat_id, 0.0) - now)
        if not is_group(chat_id):
            return wait
        allowed = max(1, self.per_minute - spare)
        return max(wait, self._uses.wait_s(chat_id, limit=allowed))

    def note_send(self, chat_id: int) -> None:
        """A send or edit to `chat_id` goes out now: it takes a slot."""
        if not is_group(chat_id):
            return
        self._uses.add(chat_id)

    def hold(self, chat_id: int, seconds: float) -> None:
        """Telegram answered 429 with `retry_after`: nothing goes to the chat until then."""
        if len(self._held_until) > _SWEEP_OVER:
            self._sweep()
        until = self.clock.monotonic() + max(0.0, seconds)
        self._held_until[chat_id] = max(self._held_until.get(chat_id, 0.0), until)

    async def acquire(self, chat_id: int) -> None:
        """Wait for a slot (no spare kept: this send must go out), then take it."""
        while (wait := self.wait_s(chat_id)) > 0:
            await self.clock.sleep(wait)
        self.note_send(chat_id)

    def _sweep(self) -> None:
        now = self.clock.monotonic()
        for chat_id, until in list(self._held_until.items()):
            if until <= now:
                del self._held_until[chat_id]
