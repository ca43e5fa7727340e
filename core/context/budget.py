"""The budget arithmetic both context builders share: which counter, what framing costs,
how much of the oldest material must go.

The engine and `ChunkContextBuilder` fit different material but must agree on these
rules, or one of them would hand the model more than the window. The framing cost is
`count_messages`' own rule, never a copy of it.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.text.tokens import TokenCounter, get_counter, message_tokens


def resolve_counter(
    counter: TokenCounter | str | None, argument: str = "token_counter"
) -> TokenCounter:
    """A counter object for `counter`: itself, the named tokenizer, or the default.

    `argument` names the caller's parameter in the error for anything else.
    """
    if counter is None or isinstance(counter, str):
        return get_counter(counter)
    if not callable(getattr(counter, "count", None)):
        raise TypeError(f"{argument} must be a TokenCounter or a name, not {counter!r}")
    return counter


def framing_tokens(role: str, counter: TokenCounter) -> int:
    """What one plain chat message of `role` costs beyond its content's own count."""
    return message_tokens({"role": role, "content": ""}, counter)


def oldest_to_drop(costs: Iterable[int], excess: int) -> int:
    """How many items, oldest first with these costs, must go to shed `excess` tokens.

    Counts every item whose cost it needed, so dropping that many sheds at least
    `excess` when the costs are exact; a caller whose costs only estimate the whole
    recounts and asks again. 0 when nothing is over.
    """
    if excess <= 0:
        return 0
    dropped = 0
    for cost in costs:
        dropped += 1
        excess -= cost
        if excess <= 0:
            break
    return dropped
