"""bench/RESULTS.md: each benchmark rewrites only its own marked section."""

from __future__ import annotations

import os
import platform
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
RESULTS_HEADER = (
    "# Benchmark results\n\n"
    "Written by `make bench` (bench/turn_bench.py, bench/context_bench.py, "
    "bench/intake_bench.py, bench/stream_bench.py, then bench/console_bench.py; "
    "bench/turn_pair.py, bench/cache_bench.py and bench/memory_bench.py are run by hand "
    "against an earlier revision). Each script "
    "rewrites only its own section, between its HTML comment markers. Speeds are ratios "
    "against a reference measured in the same run; absolute times depend on the machine "
    "and on what else it was doing (see each section's load average).\n"
)


def load_average() -> str:
    """The 1-minute load average, so a reader can tell a busy machine's numbers."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def write_section(name: str, text: str, path: Path = RESULTS) -> None:
    """Replace (or append) the section between `<!-- name -->` and `<!-- /name -->`."""
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    block = f"{start}\n{text}{end}\n"
    current = path.read_text(encoding="utf-8") if path.exists() else RESULTS_HEADER
    if start in current and end in current:
        head, rest = current.split(start, 1)
        current = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        current = current.rstrip("\n") + "\n\n" + block
    path.write_text(current, encoding="utf-8")
