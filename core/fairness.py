"""A global bound on concurrent work plus a smaller bound per key (a chat, a sender).

Why: with only a global bound, one busy chat or sender can take every slot and make
everyone else wait out a timeout. A slot is waited for per key first and only then
globally, so work queued behind its own key never holds a global slot. Keys are forgotten
when idle, so memory is bounded by the keys with work in flight or waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class _Gate:
    limit: asyncio.Semaphore
    users: int = 0  # holders and waiters; the gate is dropped at 0


@dataclass
class FairLimiter:
    """`async with limiter.slot("chat:x", "user:y"):` — at most `per_key` per key, `total`
    in all."""

    total: int
    per_key: int
    _global: asyncio.Semaphore = field(init=False, repr=False)
    _gates: dict[str, _Gate] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.total < 1 or self.per_key < 1:
            raise ValueError("total and per_key must be >= 1")
        self.per_key = min(self.per_key, self.total)
        self._global = asyncio.Semaphore(self.total)

    @asynccontextmanager
    async def slot(self, *keys: str) -> AsyncIterator[None]:
        """Hold one slot of every key given (in a fixed order: no deadlock) and one global."""
        async with AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                await stack.enter_async_context(self._keyed(key))
            async with self._global:
                yield

    def held(self, key: str) -> int:
        """Slots of `key` held or waited for now (for tests and health)."""
        gate = self._gates.get(key)
        return gate.users if gate is not None else 0

    @asynccontextmanager
    async def _keyed(self, key: str) -> AsyncIterator[None]:
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = _Gate(asyncio.Semaphore(self.per_key))
        gate.users += 1
        try:
            async with gate.limit:
                yield
        finally:
            gate.users -= 1
            if gate.users == 0 and self._gates.get(key) is gate:
                del self._gates[key]
