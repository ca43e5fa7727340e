"""Names, schemas and results of MCP tools, in the shapes the model and chat need.

No SDK import here: results arrive as the SDK's pydantic models but are read by
attribute, so this module (and its tests) stay light.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

MAX_FUNCTION_NAME = 64  # OpenAI-compatible providers' limit on a function name
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str:
    """`server__tool`, sanitised, at most 64 characters, always ending in the tool's name."""
    own = _UNSAFE.sub("_", tool) or "tool"
    prefix = _UNSAFE.sub("_", server)
    room = MAX_FUNCTION_NAME - len(own) - 2
    if room < 1:
        return own[-MAX_FUNCTION_NAME:]
    return f"{prefix[:room]}__{own}"


def function_schema(schema: Any) -> dict[str, Any]:
    """An MCP input schema as an OpenAI-compatible `parameters` object."""
    out: dict[str, Any] = copy.deepcopy(schema) if isinstance(schema, dict) else {}
    out.pop("$schema", None)
    out.pop("title", None)
    out["type"] = "object"
    if not isinstance(out.get("properties"), dict):
        out["properties"] = {}
    required = out.get("required")
    if not isinstance(required, list):
        out.pop("required", None)
    return out


def argument_summary(schema: dict[str, Any]) -> str:
    """`word: string (required), limit: integer` for the markers-mode guide."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        parts.append(f"{name}: {kind}{' (required)' if name in required else ''}")
    return ", ".join(parts) or "no arguments"


def render_result(result: Any, max_chars: int) -> str:
    """A CallToolResult as plain text: text kept, images and resources described, the
    whole cut to `max_chars` with a note saying so (never base64 in the context)."""
    pieces: list[str] = []
    for item in getattr(result, "content", None) or []:
        pieces.append(_content_text(item))
    structured = getattr(result, "structured_content", None)
    if not pieces and structured is not None:
        pieces.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(p for p in pieces if p) or "(the tool returned nothing)"
    return bound(text, max_chars)


def bound(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    return f"{text[:max_chars]}\n[… {cut} more characters were cut: the result was too long]"


def _content_text(item: Any) -> str:
    kind = getattr(item, "type", "")
    if kind == "text":
        return str(getattr(item, "text", ""))
    if kind in ("image", "audio"):
        data = getattr(item, "data", "") or ""
        size = len(data) * 3 // 4  # base64 -> bytes, about
        return f"({kind}, {getattr(item, 'mime_type', None) or 'unknown type'}, ~{size} bytes)"
    if kind == "resource":
        res = getattr(item, "resource", None)
        uri = getattr(res, "uri", "")
        body = getattr(res, "text", None)
        if isinstance(body, str):
            return f"(resource {uri})\n{body}"
        return f"(resource {uri}, {getattr(res, 'mime_type', None) or 'binary'}, not shown)"
    if kind == "resource_link":
        return f"(link to resource {getattr(item, 'uri', '')}: {getattr(item, 'name', '')})"
    return f"({kind or 'unknown'} content, not shown)"
