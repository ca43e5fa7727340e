"""A DNS stand-in for the safe fetcher: names we choose resolve to addresses we choose."""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult


class MapResolver(AbstractResolver):
    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"unknown host {host}")
        return [
            ResolveResult(
                hostname=host,
                host=self.table[host],
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        pass
