"""FakeTelegram: a Telegram Bot API server on 127.0.0.1 for tests.

Why a server and not a mock: the channel under test goes through the real
python-telegram-bot (its Updater, its request layer, its JSON parsing, its error
mapping), pointed here with `base_url`/`base_file_url`, so wire-format and error
handling mistakes show up as they would against api.telegram.org.

Usage::

    async with FakeTelegram() as tg:                      # tg.root -> "http://127.0.0.1:PORT"
        alice = user(1001, "Alice")
        tg.push_message(private_chat(alice), alice, "hi")  # queued for getUpdates
        tg.push_raw({"update_id": 5, "message": {}})        # malformed, sent as is
        tg.fail("sendMessage", 429, retry_after=1)          # next sendMessage -> 429
        tg.set_conflict(True)                               # every getUpdates -> 409
        tg.stall(); tg.resume()                             # hold getUpdates at the door
        tg.hold_sends(); tg.release_sends()                 # sendMessage waits, unrecorded
        tg.forbid_private(1001)                             # DM to 1001 -> 403
        photo = tg.add_photo(b"...jpeg...")                 # PhotoSize list for a message
        calls = await tg.wait_for("sendMessage", count=2)   # event-based, no sleeps
        tg.sent                                             # sendMessage params, in order
        FakeTelegram(clock=virtual.monotonic)               # the clock of `at` and 429s

Chats as the user sees them, drafts, edits, reactions, per-chat 429s and entity checks:
see telegram_chat.py.

`Inbox` is the daemon side of a channel test: the message handler, recording what it
gets and answering through a function the test supplies.

Implements what the channel uses: getMe, getUpdates (long polling with offsets, like
Telegram: an update is delivered until a later offset confirms it), sendMessage,
editMessageText, sendMessageDraft, deleteMessage, setMessageReaction, sendChatAction,
getFile + file download, setMyCommands, deleteWebhook, setWebhook.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes.door import Door
from tests.fakes.telegram_chat import api_error as _error
from tests.fakes.telegram_chat import api_ok as _ok
from tests.fakes.telegram_chat import utf16_len
from tests.fakes.telegram_members import MemberModel

DEFAULT_TOKEN = "123456:TEST-fake-token"

# Form fields python-telegram-bot sends JSON-encoded (everything else is a plain string).
_JSON_FIELDS = frozenset(
    {
        "offset",
        "limit",
        "timeout",
        "chat_id",
        "message_thread_id",
        "reply_parameters",
        "allowed_updates",
        "commands",
        "scope",
        "drop_pending_updates",
        "max_connections",
        "reply_markup",
        "link_preview_options",
        "disable_notification",
        "entities",
        "protect_content",
        "reply_to_message_id",
        "message_id",
        "draft_id",
        "reaction",
        "is_big",
    }
)


@dataclass(frozen=True)
class ApiCall:
    """One Bot API request as the server saw it (params decoded)."""

    method: str
    params: dict[str, Any]
    at: float


def user(
    user_id: int,
    first_name: str = "Alice",
    last_name: str | None = None,
    username: str | None = None,
    *,
    is_bot: bool = False,
) -> dict[str, Any]:
    data: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
    if last_name is not None:
        data["last_name"] = last_name
    if username is not None:
        data["username"] = username
    return data


def private_chat(who: dict[str, Any]) -> dict[str, Any]:
    return {"id": who["id"], "type": "private", "first_name": who["first_name"]}


def group_chat(chat_id: int = -1001234, title: str = "Test group", *, forum: bool = False) -> dict:
    chat: dict[str, Any] = {"id": chat_id, "type": "supergroup", "title": title}
    if forum:
        chat["is_forum"] = True
    return chat


def sticker() -> dict[str, Any]:
    """A regular sticker: a message the bot cannot read."""
    return {
        "file_id": "s1",
        "file_unique_id": "us1",
        "width": 512,
        "height": 512,
        "is_animated": False,
        "is_video": False,
        "type": "regular",
    }


def entity(kind: str, text: str, part: str, **extra: Any) -> dict[str, Any]:
    """An entity of type `kind` covering the first `part` in `text`, in UTF-16 units."""
    start = text.index(part)
    return {
        "type": kind,
        "offset": utf16_len(text[:start]),
        "length": utf16_len(part),
        **extra,
    }


class FakeTelegram(MemberModel):
    """The fake server; see the module docstring for the scripting API."""

    def __init__(
        self,
        *,
        token: str = DEFAULT_TOKEN,
        bot_id: int = 424242,
        username: str = "chatterd_test_bot",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._init_chats(clock)
        self._init_members()
        self.token = token
        self.bot_user = user(bot_id, "Chatterd", username=username, is_bot=True)
        self.bot_user |= {"can_join_groups": True, "can_read_all_group_messages": False}
        self.calls: list[ApiCall] = []
        self.sent: list[dict[str, Any]] = []
        self.voices: list[dict[str, Any]] = []  # sendVoice uploads: chat_id, bytes
        # sendPhoto uploads: chat_id, bytes, caption, reply_parameters, message_id
        self.photos: list[dict[str, Any]] = []
        self.last_offset = 0
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._pending: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(100)
        self._new_update = asyncio.Event()
        self._changed = asyncio.Condition()
        self._failures: dict[str, deque[tuple[int, str, int | None]]] = {}
        self._conflict = False
        self._running = asyncio.Event()
        self._running.set()
        self._closing = False
        self._forbidden: set[int] = set()
        self._chats: dict[int, dict[str, Any]] = {}
        self._files: dict[str, tuple[bytes, str, int | None]] = {}
        self._file_ids = itertools.count(1)
        # Large streamed files: path -> (first bytes, total size); bytes the server wrote
        # for each path, and how many such downloads have ended (read, cut or refused).
        self._streams: dict[str, tuple[bytes, int]] = {}
        self.served: dict[str, int] = {}
        self.downloads_ended = 0
        self._sends_open = asyncio.Event()
        self._sends_open.set()

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # no access log: request paths carry the bot token
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = self._runner.addresses[0][1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True
        self._running.set()
        self._new_update.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def root(self) -> str:
        """What goes into `[telegram] api_base_url`."""
        return f"http://127.0.0.1:{self._port}"

    # -- scripting -------------------------------------------------------------------

    def push(self, body: dict[str, Any]) -> int:
        """Queue an update (`body` without update_id); returns the update_id given."""
        update_id = next(self._update_ids)
        self.push_raw({"update_id": update_id, **body})
        return update_id

    def push_raw(self, raw: Any) -> None:
        """Queue exactly `raw`, malformed or not (its update_id, if any, is respected)."""
        if isinstance(raw, dict) and isinstance(raw.get("update_id"), int):
            ids = next(self._update_ids)
            self._update_ids = itertools.count(max(ids, raw["update_id"] + 1))
        self._pending.append(raw)
        self._new_update.set()
        self._new_update = asyncio.Event()

    def message(
        self,
        chat: dict[str, Any],
        sender: dict[str, Any] | None,
        text: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """A Message object; extra fields (entities, photo, caption, ...) go in as given."""
        self._chats[chat["id"]] = chat
        msg: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
        }
        if sender is not None:
            msg["from"] = sender
            self.member_messages.add((chat["id"], msg["message_id"]))
        if text is not None:
            msg["text"] = text
        msg.update(fields)
        return msg

    def push_message(
        self, chat: dict[str, Any], sender: dict[str, Any] | None, text: str | None = None, **f: Any
    ) -> dict[str, Any]:
        msg = self.message(chat, sender, text, **f)
        self.push({"message": msg})
        return msg

    def fail(
        self,
        method: str,
        code: int,
        description: str | None = None,
        *,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` calls of `method` answer with this Bot API error."""
        if description is None:
            description = {
                400: "Bad Request",
                403: "Forbidden",
                409: "Conflict: terminated by other getUpdates request",
                429: f"Too Many Requests: retry after {retry_after}",
                502: "Bad Gateway",
            }.get(code, "Error")
        queue = self._failures.setdefault(method, deque())
        queue.extend([(code, description, retry_after)] * times)

    def set_conflict(self, on: bool) -> None:
        """While on, every getUpdates answers 409 (another instance is polling)."""
        self._conflict = on

    def stall(self) -> None:
        """getUpdates requests are held, unanswered, until `resume()`."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def hold_sends(self) -> None:
        """sendMessage and sendPhoto requests wait at the door until `release_sends()`; one
        whose client went away meanwhile is never delivered (the platform did not accept it)."""
        self._sends_open.clear()

    def release_sends(self) -> None:
        self._sends_open.set()

    def forbid_private(self, user_id: int) -> None:
        """Messages to this user's DM fail with 403, as for a user who never pressed Start."""
        self._forbidden.add(user_id)

    def add_file(self, data: bytes, *, declared_size: int | None = None) -> str:
        """Serve `data` through getFile + download; returns its file_id."""
        n = next(self._file_ids)
        file_id = f"file-{n}"
        size = len(data) if declared_size is None else declared_size
        self._files[file_id] = (data, f"photos/file_{n}.jpg", size)
        return file_id

    def add_large_file(self, head: bytes, total: int, *, reported_size: int | None) -> str:
        """A file of `total` bytes (`head`, then zeros) streamed in 64 KB chunks with no
        Content-Length, while getFile reports `reported_size` (None: omits it), as for a
        size Telegram under-reports or leaves out. `served` counts what was written."""
        n = next(self._file_ids)
        file_id = f"file-{n}"
        path = f"documents/large_{n}.png"
        self._files[file_id] = (b"", path, reported_size)
        self._streams[path] = (head, total)
        return file_id

    def add_photo(self, data: bytes, *, thumb: bytes = b"thumb") -> list[dict[str, Any]]:
        """PhotoSize list as Telegram sends it: small thumbnail first, the original last."""
        sizes = []
        for payload, side in ((thumb, 90), (data, 1280)):
            file_id = self.add_file(payload)
            sizes.append(
                {
                    "file_id": file_id,
                    "file_unique_id": f"u{file_id}",
                    "width": side,
                    "height": side * 3 // 4,
                    "file_size": len(payload),
                }
            )
        return sizes

    # -- waiting ---------------------------------------------------------------------

    def calls_of(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(
        self,
        method: str,
        count: int = 1,
        *,
        where: Callable[[ApiCall], bool] | None = None,
        within_s: float = 5.0,
    ) -> list[ApiCall]:
        """Wait until `count` calls of `method` (matching `where`) were seen."""

        def matching() -> list[ApiCall]:
            return [c for c in self.calls_of(method) if where is None or where(c)]

        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(matching()) >= count), within_s
            )
        return matching()

    async def wait_until(self, condition: Callable[[], bool], *, within_s: float = 5.0) -> None:
        """Wait until `condition()` holds; checked after every call and every answer."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), within_s)

    # -- the API ---------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        file_prefix = f"/file/bot{self.token}/"
        if path.startswith("/file/bot"):
            if not path.startswith(file_prefix):
                return web.Response(status=401, text="Unauthorized")
            file_path = path[len(file_prefix) :]
            if file_path in self._streams:
                return await self._stream(request, file_path)
            return self._download(file_path)
        prefix, _, method = path.lstrip("/").partition("/")
        if prefix != f"bot{self.token}":
            return _error(401, "Unauthorized")
        params = await _decode(request)
        call = ApiCall(method, params, self.now())
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        if method in ("sendMessage", "sendPhoto") and not self._sends_open.is_set():
            await self._sends_open.wait()
            if request.transport is None or request.transport.is_closing():
                return web.Response(status=499)  # the sender is gone: nothing delivered
        failures = self._failures.get(method)
        if failures:
            code, description, retry_after = failures.popleft()
            return _error(code, description, retry_after)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found")
        self._current_call = call  # handlers run to _over_limit without awaiting
        response = await handler(params)
        async with self._changed:  # state changed: wake wait_until
            self._changed.notify_all()
        return response

    async def _api_getMe(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        return _ok(self.bot_user)

    async def _api_getUpdates(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        await self._running.wait()
        if self._conflict:
            return _error(
                409,
                "Conflict: terminated by other getUpdates request; "
                "make sure that only one bot instance is running",
            )
        offset = params.get("offset")
        if isinstance(offset, int) and offset > 0:
            self.last_offset = offset
            self._pending = [u for u in self._pending if _update_id(u) >= offset]
        timeout = float(params.get("timeout") or 0)
        if not self._pending and timeout > 0 and not self._closing:
            try:
                await asyncio.wait_for(self._new_update.wait(), timeout)
            except TimeoutError:
                pass
            await self._running.wait()  # a stall that began while we were waiting
        limit = int(params.get("limit") or 100)
        return _ok(self._pending[:limit])

    async def _api_sendMessage(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        chat_id = params.get("chat_id")
        text = params.get("text")
        if not isinstance(chat_id, int):
            return _error(400, "Bad Request: chat not found")
        if not text or not str(text).strip():
            return _error(400, "Bad Request: message text is empty")
        if utf16_len(str(text)) > 4096:
            return _error(400, "Bad Request: message is too long")
        if chat_id in self._forbidden:
            return _error(403, "Forbidden: bot can't initiate conversation with a user")
        refusal = self._refusal(params)
        if refusal is not None:
            return _error(400, refusal)
        if (retry_after := self._over_limit(chat_id, "sendMessage")) is not None:
            return _error(429, f"Too Many Requests: retry after {retry_after}", retry_after)
        chat = self._chats.get(chat_id) or {
            "id": chat_id,
            "type": "private" if chat_id > 0 else "supergroup",
        }
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": self.bot_user,
            "text": str(text),
        }
        if isinstance(params.get("message_thread_id"), int):
            message["message_thread_id"] = params["message_thread_id"]
        self.sent.append(params | {"message_id": message["message_id"]})
        self._store(chat_id, message["message_id"], params)
        return _ok(message)

    async def _api_sendVoice(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        """A voice message: refused unless the upload is OGG (what a voice bubble needs)."""
        chat_id = _json_or_str(str(params.get("chat_id")))
        voice = params.get("voice")
        if not isinstance(voice, dict) or not voice["bytes"].startswith(b"OggS"):
            return _error(400, "Bad Request: wrong file type for a voice message")
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": self.bot_user,
            "voice": {"file_id": "sent-voice", "file_unique_id": "sv", "duration": 1},
        }
        self.voices.append({"chat_id": chat_id, "bytes": voice["bytes"]})
        return _ok(message)

    async def _api_sendPhoto(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        """A photo: refused unless the upload is an image file (PNG or JPEG)."""
        chat_id = _json_or_str(str(params.get("chat_id")))
        photo = params.get("photo")
        if not isinstance(photo, dict) or not (
            photo["bytes"].startswith(b"\x89PNG") or photo["bytes"].startswith(b"\xff\xd8")
        ):
            return _error(400, "Bad Request: IMAGE_PROCESS_FAILED")
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": self.bot_user,
            "photo": [{"file_id": "sent-photo", "file_unique_id": "sp", "width": 4, "height": 4}],
        }
        if params.get("caption"):
            message["caption"] = params["caption"]
        self.photos.append(
            {
                "chat_id": chat_id,
                "bytes": photo["bytes"],
                "caption": params.get("caption"),
                "reply_parameters": params.get("reply_parameters"),
                "message_id": message["message_id"],
            }
        )
        return _ok(message)

    async def _api_sendChatAction(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        return _ok(True)

    async def _api_setMyCommands(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        return _ok(True)

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        return _ok(True)

    async def _api_setWebhook(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        return _ok(True)

    async def _api_getFile(self, params: dict[str, Any]) -> web.Response:  # noqa: N802
        file_id = str(params.get("file_id"))
        if file_id not in self._files:
            return _error(400, "Bad Request: invalid file_id")
        _, path, size = self._files[file_id]
        found: dict[str, Any] = {"file_id": file_id, "file_unique_id": f"u{file_id}"}
        if size is not None:
            found["file_size"] = size
        return _ok(found | {"file_path": path})

    async def _stream(self, request: web.Request, file_path: str) -> web.StreamResponse:
        head, total = self._streams[file_path]
        response = web.StreamResponse(headers={"Content-Type": "image/png"})
        response.enable_chunked_encoding()
        self.served[file_path] = 0
        try:
            await response.prepare(request)
            chunk = 64 * 1024
            zeros = bytes(chunk)
            while self.served[file_path] < total:
                done = self.served[file_path]
                piece = head[done : done + chunk] if done < len(head) else zeros
                piece = piece[: total - done]
                await response.write(piece)
                self.served[file_path] = done + len(piece)
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the reader hung up: that is what a cap looks like from here
        finally:
            self.downloads_ended += 1
        return response

    def _download(self, file_path: str) -> web.Response:
        for data, path, _ in self._files.values():
            if path == file_path:
                return web.Response(body=data, content_type="image/jpeg")
        return web.Response(status=404, text="Not Found")


def _update_id(update: Any) -> int:
    if isinstance(update, dict) and isinstance(update.get("update_id"), int):
        return update["update_id"]
    return 1 << 62  # malformed without an id: never confirmed, always re-sent (like a bug)


async def _decode(request: web.Request) -> dict[str, Any]:
    if request.content_type == "application/json":
        body = await request.json()
        return dict(body) if isinstance(body, dict) else {}
    form = await request.post()
    params: dict[str, Any] = {}
    for key, value in form.items():
        if not isinstance(value, str):  # a file upload (sendVoice): its name and bytes
            params[key] = {"filename": value.filename, "bytes": value.file.read()}
            continue
        if key in _JSON_FIELDS:
            try:
                params[key] = json.loads(value)
                continue
            except ValueError:
                pass
        params[key] = value
    params.update({k: _json_or_str(v) for k, v in request.query.items() if k in _JSON_FIELDS})
    return params


def _json_or_str(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


class Inbox:
    """A MessageHandler for tests: records every message, answers with `respond(message)`
    through the door (start the channel with tests.fakes.door.start_answering)."""

    def __init__(self, respond: Callable[[Any], Any] | None = None) -> None:
        self.messages: list[Any] = []
        self.respond = respond
        self.door = Door()  # answers go out through the channel, as the daemon sends them
        self._changed = asyncio.Condition()

    async def __call__(self, message: Any) -> None:
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()
        async with self.door.working(message):  # "typing…", as the dispatcher shows it
            answer = self.respond(message) if self.respond is not None else None
            if inspect.isawaitable(answer):
                answer = await answer
        await self.door.answer(message, answer)

    async def wait(self, count: int = 1, within_s: float = 5.0) -> list[Any]:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.messages) >= count), within_s
            )
        return list(self.messages)
