"""Reading a native (OpenAI function-calling) tool call: its id, name and arguments, and
the one argument a tool runs with.

A model's JSON is outside input (too long, not JSON, not an object, a part missing); the
loop only acts on the argument or the reason not to run.
"""

from __future__ import annotations

import json
from typing import Any

from core.tools.registry import MAX_MARKER_ARG_CHARS, Tool


def call_parts(raw: dict[str, Any]) -> tuple[str | None, str, str]:
    """(id, name, arguments) from an OpenAI-shaped tool call, tolerating missing parts."""
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        return None, "", ""
    return raw.get("id"), str(function.get("name") or ""), as_json_text(function.get("arguments"))


def as_json_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    try:
        return json.dumps(arguments)
    except (TypeError, ValueError):
        return ""


def native_arg(arguments: str, tool: Tool) -> tuple[str, str | None]:
    """The tool argument from a native call's JSON, or a reason it cannot be used."""
    if len(arguments) > max(MAX_MARKER_ARG_CHARS, tool.max_arg_chars) + 100:
        return "", "Not run: the arguments are too long."
    try:
        data = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return "", "Not run: the arguments are not valid JSON."
    if not isinstance(data, dict):
        return "", "Not run: the arguments must be one JSON object."
    return tool.arg_from(data)
