"""The leases table: one row per name claimed now (a chat's turn order, a reminder's send)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from memory.db.base import Base
from memory.db.rows import UTCDateTime

NAME_LEN = 200
HOLDER_LEN = 64


class LeaseRow(Base):
    """Who holds `name` and until when; the row is deleted when the holder lets go."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(NAME_LEN), primary_key=True)
    holder: Mapped[str] = mapped_column(String(HOLDER_LEN))
    lease_until: Mapped[datetime] = mapped_column(UTCDateTime())
