"""The model's `run_python` tool: native mode, one `code` parameter; markers mode,
`[Python]` followed by a fenced code block (code has brackets and lines, so the one-line
marker of other tools cannot carry it).

Offered only to senders `[sandbox] allow` names, and checked again when a call runs
(service.py). The code is kept exactly as written (`verbatim`).
"""

from __future__ import annotations

import re

from core.sandbox.service import Sandbox
from core.tools.registry import Observation, Tool, ToolContext

MAX_CODE_CHARS = 20_000
_FENCED = re.compile(
    r"\[[ \t]*Python[ \t]*\][ \t]*\n?[ \t]*```[ \t]*(?:python|py)?[ \t]*\n"
    rf"(?P<arg>(?:(?!```).){{1,{MAX_CODE_CHARS}}}?)\n[ \t]*```",
    re.IGNORECASE | re.DOTALL,
)


def python_tool(sandbox: Sandbox, *, host_slack_s: float = 30.0) -> Tool:
    async def run_python(code: str, ctx: ToolContext) -> Observation:
        return await sandbox.run(code, ctx)

    limits = sandbox.limits
    return Tool(
        name="run_python",
        marker="Python",
        usage="[Python] then a ```python fenced block``` — run Python 3 in this chat's "
        "own folder (no network); print what you need; files saved under out/ are sent "
        "to the chat; documents shared in the chat are under in/",
        description="Run Python 3 code in a sandbox with no network, in this chat's own "
        "folder (kept between runs). Print results to read them. Files written to out/ "
        "are sent to the chat (images as photos); documents shared in the chat are "
        f"readable under in/. Limits: {limits.timeout_s:g} s, {limits.memory_mb} MB.",
        handler=run_python,
        arg_attr="code",
        arg_description="the Python 3 source to run",
        result_tag="python_result",
        status="🐍 running code…",
        pattern=_FENCED,
        verbatim=True,
        max_arg_chars=MAX_CODE_CHARS,
        timeout_s=limits.timeout_s + host_slack_s,
        offered_to=sandbox.may_run,
    )
