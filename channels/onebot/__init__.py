"""QQ through OneBot v11 (NapCat, Lagrange, go-cqhttp) over WebSocket."""

from channels.onebot.channel import OneBotChannel

__all__ = ["OneBotChannel"]
