"""A core engine's limits record filled from its config section.

Why one helper: the engines' limits (FeedLimits, ReminderLimits, RunLimits) name their
fields like the keys of their `[section]`; copying each key by hand repeated that rule in
every wiring module. A field the section does not have keeps the record's default.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from pydantic import BaseModel

R = TypeVar("R")


def limits_from(section: BaseModel, record: type[R]) -> R:
    """`record` with each field the section names set to the section's value."""
    keys = type(section).model_fields
    named: Any = record  # a dataclass type: fields() takes it
    return record(**{f.name: getattr(section, f.name) for f in fields(named) if f.name in keys})
