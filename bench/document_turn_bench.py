"""One turn that shares a huge PDF or DOCX: its wall time and the memory it costs (issue 44).

Why: the hostile day asked that any one shared page or document cost at most 300 MiB at
the peak, counting the daemon and its parse children together. This starts `chatterd run`
as deployed (bench/turn_bench.py's DaemonProcess, SQLite) with Telegram pointed at the
fake Bot API (tests/fakes/telegram_server.py), sends it one document as Alice's private
message, and samples the resident memory (VmRSS) of the daemon and of every process below
it every 20 ms until the answer is sent, as bench/page_turn_bench.py does for pages. The
files are made here (tests/fakes/files.py): a 3,000-page PDF of 11 MB, and a DOCX of
0.6 MB whose XML is 52 MB. `[documents] max_bytes` is raised to 20 MB, the most a
Telegram bot can download. `--before DIR` measures another checkout in the same run.

    mkdir DIR && git archive main | tar -x -C DIR
    .venv/bin/python bench/document_turn_bench.py [--before DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.page_turn_bench import _rss_mib, _sample, _tree  # noqa: E402
from bench.results import cpu_model, load_average, write_section  # noqa: E402
from bench.turn_bench import DaemonProcess, drive  # noqa: E402
from tests.fakes.files import make_long_docx, make_long_pdf  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, private_chat, user  # noqa: E402

MEMORY_TARGET_MIB = 300
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ALICE = user(1001, "Alice")


class TelegramDaemon(DaemonProcess):
    """The bench daemon with Telegram on the fake Bot API, documents up to 20 MB."""

    def __init__(self, tmp: Path, model_url: str, tg: FakeTelegram, root: Path) -> None:
        super().__init__(tmp, model_url, root=root)
        self.tg = tg

    def config(self) -> str:
        return super().config() + "\n".join(
            [
                "[telegram]",
                "enabled = true",
                f'token = "{self.tg.token}"',
                f'api_base_url = "{self.tg.root}"',
                "[documents]",
                "max_bytes = 20971520",
                "",
            ]
        )


async def measure(root: Path, data: bytes, name: str, mime: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeOpenAI("ok, noted.") as model, FakeTelegram() as tg:
            async with TelegramDaemon(Path(tmp), model.base_url, tg, root) as daemon:
                assert daemon.proc is not None
                pid = daemon.proc.pid
                warm = await drive(daemon.chat_url, [[_body("hello")]])
                assert warm.answered == 1
                await asyncio.sleep(3)
                idle = sum(_rss_mib(p) for p in _tree(pid))
                file_id = tg.add_file(data)
                document = {
                    "file_id": file_id,
                    "file_unique_id": f"u-{file_id}",
                    "file_name": name,
                    "mime_type": mime,
                    "file_size": len(data),
                }
                peak: dict[str, float] = {}
                stop = asyncio.Event()
                sampler = asyncio.create_task(_sample(pid, peak, stop))
                started = time.monotonic()
                tg.push_message(
                    private_chat(ALICE), ALICE, None, caption="what is this?", document=document
                )
                await tg.wait_for("sendMessage", 1, within_s=300)
                wall = time.monotonic() - started
                stop.set()
                await sampler
                content = str(model.requests[-1]["messages"][-1]["content"])
    return {
        "idle": idle,
        "peak": peak["total"],
        "above": peak["total"] - idle,
        "wall": wall,
        "note": _tail(content),
    }


def _tail(content: str) -> str:
    """The end of the document's note: whether it was read in part, or why not."""
    at = content.find("…(read only in part")
    if at < 0:
        at = content.find("…(cut")
    if at < 0:
        at = content.find(" — could not be read")
    return " ".join(content[at:].split())[:120] if at >= 0 else "read whole"


def _body(text: str) -> dict[str, str]:
    return {"user_id": "docs", "chat_type": "private", "sender_name": "Reader", "text": text}


def render(rows: list[tuple[str, str, dict[str, object]]], seconds: float, before: str) -> str:
    lines = [
        "## One shared huge PDF or DOCX in a turn (bench/document_turn_bench.py)",
        "",
        f"Command: `.venv/bin/python bench/document_turn_bench.py --before DIR` (DIR: `git "
        f"archive {before}`)  ",
        f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {sys.version.split()[0]}; "
        f"run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds:.0f} s; load average "
        f"(1 min) {load_average()} at the end.",
        "",
        "`chatterd run` (SQLite, Telegram on the fake Bot API, `[documents] max_bytes` = "
        "20 MB) gets one private message with the document. Memory is the summed VmRSS of "
        "the daemon and every process below it, sampled every 20 ms until the answer is "
        "sent; idle is the same sum 3 s after a first plain turn. The note is the end of "
        "what the model was told.",
        "",
        "| document | revision | idle MiB | peak MiB | above idle MiB | turn s | note |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for doc, label, p in rows:
        lines.append(
            f"| {doc} | {label} | {p['idle']:.0f} | {p['peak']:.0f} | {p['above']:.0f} | "
            f"{p['wall']:.1f} | {p['note']} |"
        )
    lines += ["", "| target | measured | result |", "|---|---|---|"]
    for doc, label, p in rows:
        if label == "this tree":
            above = float(str(p["above"]))
            verdict = "PASS" if above <= MEMORY_TARGET_MIB else "FAIL"
            lines.append(
                f"| {doc}: daemon and children ≤ {MEMORY_TARGET_MIB} MiB above idle | "
                f"{above:.0f} MiB | **{verdict}** |"
            )
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="an earlier source tree to measure too")
    parser.add_argument("--before-name", default="main before this change", help="what it holds")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    started = time.monotonic()
    pdf = make_long_pdf(3000)
    docx = make_long_docx(150_000)
    files = [
        (f"PDF, 3,000 pages, {len(pdf) / 1e6:.1f} MB", pdf, "annual.pdf", "application/pdf"),
        (f"DOCX, {len(docx) / 1e6:.1f} MB, 52 MB of XML", docx, "minutes.docx", DOCX),
    ]
    rows: list[tuple[str, str, dict[str, object]]] = []
    for label, data, name, mime in files:
        if args.before:
            rows.append(
                (label, "before", asyncio.run(measure(args.before.resolve(), data, name, mime)))
            )
        rows.append((label, "this tree", asyncio.run(measure(ROOT, data, name, mime))))
    text = render(rows, time.monotonic() - started, args.before_name)
    print(text)
    if not args.no_write:
        write_section("document-turn-bench", text)


if __name__ == "__main__":
    main()
