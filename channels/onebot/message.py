"""OneBot v11 message bodies: segment arrays, legacy CQ-code strings, and what they mean.

Incoming messages arrive either as an array of segments `{"type", "data"}` or as a
CQ-code string (`hi [CQ:at,qq=123] &#91;x&#93;`); both become the same segment list.
Outgoing messages are always built as segments, never as CQ strings, so text a user
typed can never turn into a CQ code (an @all, an image fetch, ...) on the way back.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

Segment = dict[str, Any]

# Short placeholders for segments a text model cannot use directly.
_PLACEHOLDERS = {
    "face": "[face]",
    "mface": "[sticker]",
    "record": "[voice message]",
    "video": "[video]",
    "rps": "[rock-paper-scissors]",
    "dice": "[dice]",
    "shake": "[shake]",
    "poke": "[poke]",
    "anonymous": "",
    "contact": "[contact card]",
    "music": "[music]",
    "forward": "[forwarded messages]",
    "node": "[forwarded message]",
    "xml": "[card]",
    "json": "[card]",
    "markdown": "[markdown]",
}


@dataclass(frozen=True)
class FileSegment:
    """What a message carries and is fetched on demand: an image (`image` segment, by its
    http(s) URL), a file (NapCat `file` segment) or a voice message (`record`)."""

    kind: str  # "image" | "document" | "voice"
    file: str  # the implementation's name or id for it
    name: str = ""
    file_id: str = ""
    url: str = ""
    size: int | None = None


@dataclass(frozen=True)
class ParsedMessage:
    """What the channel needs from a message body."""

    text: str
    mentions_self: bool = False
    mentions_all: bool = False
    reply_to: str | None = None
    images: tuple[FileSegment, ...] = ()
    files: tuple[FileSegment, ...] = ()


def cq_unescape(value: str) -> str:
    """Undo CQ escaping. `&amp;` last, so `&amp;#91;` stays the literal text `&#91;`."""
    for escaped, plain in (("&#44;", ","), ("&#91;", "["), ("&#93;", "]"), ("&amp;", "&")):
        value = value.replace(escaped, plain)
    return value


def parse_cq_string(raw: str) -> list[Segment]:
    """Split a CQ-code string into segments (OneBot v11 "string format").

    The function name runs from `[CQ:` to the first `,` or `]`; parameters are split on
    `,` and each on its first `=`. An unterminated `[CQ:` is kept as text.
    """
    segments: list[Segment] = []
    pos = 0
    while pos < len(raw):
        start = raw.find("[CQ:", pos)
        end = raw.find("]", start) if start != -1 else -1
        if start == -1 or end == -1:
            _add_text(segments, raw[pos:])
            break
        _add_text(segments, raw[pos:start])
        segments.append(_parse_code(raw[start + 4 : end]))
        pos = end + 1
    return segments


def _add_text(segments: list[Segment], escaped: str) -> None:
    if escaped:
        segments.append({"type": "text", "data": {"text": cq_unescape(escaped)}})


def _parse_code(body: str) -> Segment:
    kind, _, params = body.partition(",")
    data: dict[str, str] = {}
    if params:
        for part in params.split(","):
            key, _, value = part.partition("=")
            if key:
                data[key] = cq_unescape(value)
    return {"type": kind.strip(), "data": data}


def normalize_message(message: Any) -> list[Segment]:
    """Either wire form -> a clean segment list; malformed entries are dropped (logged)."""
    if isinstance(message, str):
        return parse_cq_string(message)
    if isinstance(message, dict):  # a single segment object is tolerated
        message = [message]
    if not isinstance(message, list):
        log.warning("onebot: message body of type %s ignored", type(message).__name__)
        return []
    segments: list[Segment] = []
    for item in message:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            log.warning("onebot: malformed message segment ignored")
            continue
        data = item.get("data") or {}
        if not isinstance(data, dict):
            log.warning("onebot: segment %r with non-object data ignored", item["type"])
            continue
        clean = {str(k): _as_text(v) for k, v in data.items()}
        segments.append({"type": item["type"], "data": clean})
    return segments


def _as_text(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return str(value)
    return value


def interpret(segments: list[Segment], self_id: str | None) -> ParsedMessage:
    """Render segments as plain text and pull out mentions, the reply target, images.

    An @ of the bot itself is removed from the text (the flag carries it), so
    "@bot /help" still reads as the command "/help".
    """
    parts: list[str] = []
    mentions_self = mentions_all = False
    reply_to: str | None = None
    images: list[FileSegment] = []
    files: list[FileSegment] = []
    for seg in segments:
        kind, data = seg["type"], seg["data"]
        if kind == "text":
            parts.append(str(data.get("text", "")))
        elif kind == "at":
            qq = str(data.get("qq", ""))
            if self_id is not None and qq == self_id:
                mentions_self = True
            elif qq == "all":
                mentions_all = True
                parts.append("@all")
            else:
                name = data.get("name")
                parts.append(f"@{name}" if isinstance(name, str) and name else f"@{qq}")
        elif kind == "reply":
            if data.get("id") not in (None, ""):
                reply_to = str(data["id"])
        elif kind == "image":
            image = _image(data)
            if image is not None:
                images.append(image)
            else:
                parts.append("[image]")
        elif kind in ("record", "file") and (found := _file(kind, data)) is not None:
            files.append(found)
        else:
            parts.append(_placeholder(kind, data))
    text = _tidy("".join(parts))
    return ParsedMessage(text, mentions_self, mentions_all, reply_to, tuple(images), tuple(files))


def _file(kind: str, data: dict[str, Any]) -> FileSegment | None:
    file = str(data.get("file") or "")
    file_id = str(data.get("file_id") or "")
    url = str(data.get("url") or "")
    if not (file or file_id or url):
        return None
    size = data.get("file_size")
    size_int = int(size) if isinstance(size, str) and size.isdigit() else None
    name = str(data.get("name") or data.get("file_name") or file or "voice")
    return FileSegment(
        "voice" if kind == "record" else "document", file, name, file_id, url, size_int
    )


def _image(data: dict[str, Any]) -> FileSegment | None:
    file = str(data.get("file") or "")
    for candidate in (data.get("url"), file):
        if isinstance(candidate, str) and candidate.lower().startswith(("http://", "https://")):
            return FileSegment("image", file, url=candidate)
    return None


def _placeholder(kind: str, data: dict[str, Any]) -> str:
    if kind == "share":
        title, url = str(data.get("title") or ""), str(data.get("url") or "")
        return f"[link: {title} {url}]".replace("  ", " ").replace(" ]", "]")
    if kind == "location":
        return f"[location: {data.get('title') or data.get('content') or ''}]"
    if kind == "file":
        return f"[file: {data.get('name') or data.get('file') or ''}]"
    return _PLACEHOLDERS.get(kind, f"[{kind}]")


def _tidy(text: str) -> str:
    """Removing an @ leaves stray spaces at the edges; inner text is kept verbatim."""
    return text.strip()


def text_segment(text: str) -> Segment:
    return {"type": "text", "data": {"text": text}}


def at_segment(user_id: str) -> Segment:
    """Addresses one member of a group (QQ shows it as @name and notifies them)."""
    return {"type": "at", "data": {"qq": user_id}}


def image_segment(data: bytes) -> Segment:
    """A picture we send, inline as `base64://` (no file the implementation must reach)."""
    return {"type": "image", "data": {"file": "base64://" + base64.b64encode(data).decode("ascii")}}


def reply_segment(message_id: str) -> Segment:
    """The reply id goes back as the implementation gave it (NapCat ids are numbers)."""
    return {"type": "reply", "data": {"id": message_id}}
