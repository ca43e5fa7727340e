"""A fake OneBot v11 implementation (what NapCat/Lagrange/go-cqhttp look like on the wire).

Reverse mode: `FakeOneBot.connect_reverse(url)` is an aiohttp WebSocket *client* that
connects to chatterd with X-Self-ID / X-Client-Role / Authorization, like NapCat's
"websocketClients". Forward mode: `FakeOneBot.serve_forward()` is a WebSocket *server*
chatterd connects to, like NapCat's "websocketServers". Both push spec-shaped events and
answer actions by echo. Independent of chatterd's code on purpose: it encodes CQ strings
and builds frames itself, so a bug in our parser cannot hide in a shared helper.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.fakes.door import Door

Responder = Callable[[dict[str, Any]], Any]  # params -> data; raise ActionRefused to fail


class ActionRefused(Exception):
    def __init__(self, retcode: int = 100, wording: str = "refused") -> None:
        super().__init__(wording)
        self.retcode, self.wording = retcode, wording


HOLD = object()  # a responder returning HOLD never answers (to test timeouts/drops)


def cq_text(text: str) -> str:
    """Escape plain text for the CQ string format."""
    return text.replace("&", "&amp;").replace("[", "&#91;").replace("]", "&#93;")


def cq_code(kind: str, **params: Any) -> str:
    """Build one CQ code, escaping parameter values (commas too)."""
    parts = [kind]
    for key, value in params.items():
        parts.append(f"{key}={cq_text(str(value)).replace(',', '&#44;')}")
    return "[CQ:" + ",".join(parts) + "]"


class FakeLink:
    """One WebSocket as the implementation sees it."""

    def __init__(self, impl: FakeOneBot, ws: Any) -> None:
        self.impl = impl
        self.ws = ws
        self.actions: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.closed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                self.actions.put_nowait(frame)
                response = self.impl.answer(frame)
                if response is not None:
                    await self.ws.send_str(json.dumps(response))
        finally:
            self.closed.set()

    async def send_event(self, event: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(event, ensure_ascii=False))

    async def send_raw(self, text: str) -> None:
        await self.ws.send_str(text)

    async def next_action(self, action: str | None = None, limit_s: float = 3.0) -> dict[str, Any]:
        """The next action frame (of this name, skipping others) chatterd sent us."""
        async with asyncio.timeout(limit_s):
            while True:
                frame = await self.actions.get()
                if action is None or frame.get("action") == action:
                    return frame

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            await self._reader

    async def wait_closed(self, limit_s: float = 3.0) -> None:
        async with asyncio.timeout(limit_s):
            await self.closed.wait()


FORWARD_ACTIONS = ("send_group_forward_msg", "send_private_forward_msg")
# How the fake answers the merged-forward actions:
#   "ok"       sends them (NapCat, go-cqhttp, Lagrange);
#   "missing"  has no such action: status failed, retcode 1404 (NapCat/go-cqhttp over WS);
#   "named"    status failed, retcode 200, "不支持的Api <action>" (NapCat's HTTP server);
#   "broken"   has the action but it fails this time (retcode 1200).
ForwardMode = str


class FakeOneBot:
    """The implementation's state: account, answers to actions, messages it knows.

    `clock` stamps every sent message (`sent[i]["at"]`), so a test can read the pacing
    on the same injected clock the channel waits on.
    """

    def __init__(
        self,
        self_id: int = 10001,
        nickname: str = "chatterbot",
        *,
        forward: ForwardMode = "ok",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.self_id = self_id
        self.nickname = nickname
        self.clock = clock
        self.responders: dict[str, Responder] = {
            "get_login_info": lambda p: {"user_id": self.self_id, "nickname": self.nickname},
            "send_group_msg": self._sent,
            "send_private_msg": self._sent,
            "get_msg": self._get_msg,
            "upload_group_file": self._uploaded,
            "upload_private_file": self._uploaded,
            "get_group_member_info": self._member,
            "get_stranger_info": lambda p: {"user_id": p["user_id"], "nickname": "stranger"},
        }
        for action in ("set_group_ban", "delete_msg", "set_group_kick"):
            self.responders[action] = self._moderated
        # (group, user) -> {"role", "card", "nickname"}; moderation actions as asked
        self.members: dict[tuple[int, int], dict[str, Any]] = {}
        self.moderated: list[dict[str, Any]] = []
        self.no_rights = False  # moderation actions answer retcode 102 (not a group admin)
        self.set_forward(forward)
        self.sent: list[dict[str, Any]] = []  # {"action", "params", "message_id", "at"}
        self.refused: list[dict[str, Any]] = []  # actions answered "failed": {"action", "at"}
        self.known: dict[int, dict[str, Any]] = {}  # message_id -> message (for get_msg)
        self.emoji_likes: list[dict[str, Any]] = []  # set_msg_emoji_like params (NapCat)
        # upload_group_file / upload_private_file: {"action", "to", "name", "data"}
        self.uploads: list[dict[str, Any]] = []
        self.gone: set[int] = set()  # recalled messages: a send quoting one is refused
        self._ids = itertools.count(5000)
        self._session: aiohttp.ClientSession | None = None
        self._runners: list[web.AppRunner] = []

    # -- actions ---------------------------------------------------------------------

    def set_forward(self, mode: ForwardMode) -> None:
        for action in FORWARD_ACTIONS:
            self.responders.pop(action, None)
            if mode == "ok":
                self.responders[action] = self._forwarded
            elif mode == "named":
                self.responders[action] = _refuse(200, f"不支持的Api {action}")
            elif mode == "broken":
                self.responders[action] = _refuse(1200, "转发消息失败")
            elif mode != "missing":
                raise ValueError(f"unknown forward mode {mode!r}")

    def support_emoji_like(self) -> None:
        """Answer NapCat's `set_msg_emoji_like` (other implementations lack it: 1404)."""

        def like(params: dict[str, Any]) -> None:
            params.pop("_action", None)
            self.emoji_likes.append(params)

        self.responders["set_msg_emoji_like"] = like

    def answer(self, frame: dict[str, Any]) -> dict[str, Any] | None:
        echo = frame.get("echo")
        responder = self.responders.get(frame.get("action", ""))
        if responder is None:
            self.refused.append({"action": frame.get("action"), "at": self.clock()})
            return {
                "status": "failed",
                "retcode": 1404,
                "data": None,
                "message": "API不存在",
                "wording": "API不存在",
                "echo": echo,
            }
        try:
            data = responder({**frame.get("params", {}), "_action": frame.get("action")})
        except ActionRefused as exc:
            self.refused.append({"action": frame.get("action"), "at": self.clock()})
            return {
                "status": "failed",
                "retcode": exc.retcode,
                "data": None,
                "message": exc.wording,
                "wording": exc.wording,
                "echo": echo,
            }
        if data is HOLD:
            return None
        return {"status": "ok", "retcode": 0, "data": data, "echo": echo}

    def _sent(self, params: dict[str, Any]) -> dict[str, Any]:
        segments = params.get("message")
        first = segments[0] if isinstance(segments, list) and segments else {}
        if first.get("type") == "reply" and int(first["data"]["id"]) in self.gone:
            raise ActionRefused(1200, "消息不存在")
        message_id = next(self._ids)
        action = params.pop("_action")
        self.sent.append(
            {"action": action, "params": params, "message_id": message_id, "at": self.clock()}
        )
        self.known[message_id] = {"message_id": message_id, "sender": {"user_id": self.self_id}}
        return {"message_id": message_id}

    def _forwarded(self, params: dict[str, Any]) -> dict[str, Any]:
        """A merged-forward send: refused, like NapCat, unless every item is a custom node
        with content and a sender name (either spelling)."""
        nodes = params.get("messages", params.get("message"))
        if not isinstance(nodes, list) or not nodes:
            raise ActionRefused(1400, "messages must be a non-empty list of nodes")
        for node in nodes:
            data = node.get("data") if isinstance(node, dict) else None
            if node.get("type") != "node" or not isinstance(data, dict):
                raise ActionRefused(1400, "转发消息不能和普通消息混在一起发送")
            if not data.get("content") or not (data.get("name") or data.get("nickname")):
                raise ActionRefused(1400, "node needs content and a name")
        sent = self._sent(params)
        return {**sent, "forward_id": f"fwd-{sent['message_id']}"}

    def _uploaded(self, params: dict[str, Any]) -> dict[str, Any]:
        """A file upload, as NapCat takes it: `group_id` or `user_id`, a `name`, and
        `file` as `base64://...` (a local path of this machine is refused: the fake has
        none it shares with chatterd)."""
        action = params.pop("_action")
        key = "group_id" if action == "upload_group_file" else "user_id"
        file, name = params.get("file"), params.get("name")
        if not isinstance(params.get(key), int) or not isinstance(name, str) or not name:
            raise ActionRefused(1400, f"{action} needs {key} and name")
        if not isinstance(file, str) or not file.startswith("base64://"):
            raise ActionRefused(1400, "file not found")
        data = base64.b64decode(file.removeprefix("base64://"), validate=True)
        self.uploads.append({"action": action, "to": params[key], "name": name, "data": data})
        return {"file_id": f"/{len(self.uploads)}-{name}"}

    def _member(self, params: dict[str, Any]) -> dict[str, Any]:
        group, user = int(params["group_id"]), int(params["user_id"])
        known = self.members.get((group, user), {})
        return {"group_id": group, "user_id": user, "role": "member", "nickname": "", **known}

    def _moderated(self, params: dict[str, Any]) -> None:
        if self.no_rights:
            raise ActionRefused(102, "权限不足")
        params.pop("_action", None)
        self.moderated.append(params)

    def group_increase(self, user_id: int, group_id: int = 30003) -> dict[str, Any]:
        """A `notice` / `group_increase` event: `user_id` joined `group_id`."""
        return {
            "time": int(time.time()),
            "self_id": self.self_id,
            "post_type": "notice",
            "notice_type": "group_increase",
            "sub_type": "approve",
            "group_id": group_id,
            "operator_id": 0,
            "user_id": user_id,
        }

    def _get_msg(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self.known.get(int(params["message_id"]))
        if found is None:
            raise ActionRefused(1404, "message not found")
        return found

    def texts(self) -> list[str]:
        """The text of each sent message as the QQ user sees it (a forward: its nodes)."""
        return [sent_text(entry) for entry in self.sent]

    async def wait_sent(self, count: int, limit_s: float = 3.0) -> list[dict[str, Any]]:
        """Poll (with a deadline) until chatterd has sent `count` messages."""
        deadline = time.monotonic() + limit_s
        while len(self.sent) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} sent messages, got {self.sent}")
            await asyncio.sleep(0.005)
        return self.sent

    # -- events ----------------------------------------------------------------------

    def group_message(
        self,
        message: Any,
        *,
        user_id: int = 20002,
        group_id: int = 30003,
        card: str = "",
        nickname: str = "alice",
        message_id: int | None = None,
        raw_message: str | None = None,
        role: str = "member",
    ) -> dict[str, Any]:
        return self._message_event(
            "group",
            "normal",
            message,
            user_id,
            message_id,
            raw_message,
            sender={"nickname": nickname, "card": card, "role": role},
            group_id=group_id,
            anonymous=None,
        )

    def private_message(
        self,
        message: Any,
        *,
        user_id: int = 20002,
        nickname: str = "alice",
        message_id: int | None = None,
    ) -> dict[str, Any]:
        return self._message_event(
            "private", "friend", message, user_id, message_id, None, sender={"nickname": nickname}
        )

    def _message_event(
        self,
        message_type: str,
        sub_type: str,
        message: Any,
        user_id: int,
        message_id: int | None,
        raw_message: str | None,
        *,
        sender: dict[str, Any],
        **extra: Any,
    ) -> dict[str, Any]:
        """A spec-shaped message event; the id is remembered so replies can quote it."""
        message_id = next(self._ids) if message_id is None else message_id
        self.known[message_id] = {"message_id": message_id, "sender": {"user_id": user_id}}
        return {
            "time": int(time.time()),
            "self_id": self.self_id,
            "post_type": "message",
            "message_type": message_type,
            "sub_type": sub_type,
            "message_id": message_id,
            **extra,
            "user_id": user_id,
            "message": message,
            "raw_message": raw_message if raw_message is not None else _raw(message),
            "font": 0,
            "sender": {"user_id": user_id, **sender, "sex": "unknown", "age": 0},
        }

    def heartbeat(self, interval_ms: int = 30000) -> dict[str, Any]:
        return {
            "time": int(time.time()),
            "self_id": self.self_id,
            "post_type": "meta_event",
            "meta_event_type": "heartbeat",
            "interval": interval_ms,
            "status": {"online": True, "good": True},
        }

    def lifecycle(self, sub_type: str = "connect") -> dict[str, Any]:
        return {
            "time": int(time.time()),
            "self_id": self.self_id,
            "post_type": "meta_event",
            "meta_event_type": "lifecycle",
            "sub_type": sub_type,
        }

    # -- transports ------------------------------------------------------------------

    async def connect_reverse(
        self,
        url: str,
        *,
        token: str | None = None,
        token_in_query: bool = False,
        self_id_header: bool = True,
        role: str = "Universal",
    ) -> FakeLink:
        """Connect to chatterd like a reverse-WS client; raises WSServerHandshakeError."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"X-Client-Role": role, "User-Agent": "FakeOneBot/11"}
        if self_id_header:
            headers["X-Self-ID"] = str(self.self_id)
        if token is not None and token_in_query:
            url = f"{url}?access_token={token}"
        elif token is not None:
            headers["Authorization"] = f"Bearer {token}"
        ws = await self._session.ws_connect(url, headers=headers)
        link = FakeLink(self, ws)
        link.start()
        return link

    async def serve_forward(self, *, token: str | None = None) -> ForwardServer:
        server = ForwardServer(self, token)
        await server.start()
        self._runners.append(server.runner)
        return server

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        for runner in self._runners:
            await runner.cleanup()


class ForwardServer:
    """The implementation's own WebSocket server (forward mode)."""

    def __init__(self, impl: FakeOneBot, token: str | None) -> None:
        self.impl = impl
        self.token = token
        self.links: asyncio.Queue[FakeLink] = asyncio.Queue()
        self.refused = 0
        app = web.Application()
        app.router.add_get("/", self._handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        self.url = ""

    async def start(self) -> None:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"ws://127.0.0.1:{port}/"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.token is not None:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                self.refused += 1
                raise web.HTTPUnauthorized()
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        link = FakeLink(self.impl, ws)
        link.start()
        self.links.put_nowait(link)
        await link.closed.wait()
        return ws

    async def next_link(self, limit_s: float = 3.0) -> FakeLink:
        async with asyncio.timeout(limit_s):
            return await self.links.get()


def _refuse(retcode: int, wording: str) -> Responder:
    def refuse(params: dict[str, Any]) -> Any:
        raise ActionRefused(retcode, wording)

    return refuse


def sent_text(entry: dict[str, Any]) -> str:
    """The text segments of one sent message, joined; a forward's nodes with blank lines."""
    params = entry["params"]
    if entry["action"] in FORWARD_ACTIONS:
        nodes = params.get("messages", params.get("message"))
        return "\n\n".join(_segments_text(node["data"]["content"]) for node in nodes)
    return _segments_text(params["message"])


def _segments_text(segments: Any) -> str:
    if isinstance(segments, str):
        return segments
    return "".join(seg["data"]["text"] for seg in segments if seg["type"] == "text")


def _raw(message: Any) -> str:
    if isinstance(message, str):
        return message
    out = []
    for seg in message:
        if seg["type"] == "text":
            out.append(cq_text(seg["data"]["text"]))
        else:
            out.append(cq_code(seg["type"], **seg["data"]))
    return "".join(out)


class MediaServer:
    """Serves bytes on 127.0.0.1 the way NapCat serves image files locally."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str]] = {}
        self.redirects: dict[str, str] = {}
        self.hits: list[str] = []
        # Names listed in `slow` are answered only once `gate` is set (a hung host);
        # `waiting` counts requests held there now.
        self.slow: set[str] = set()
        self.gate = asyncio.Event()
        self.waiting = 0
        # Names in `streams` are `total` bytes (the given head, then zeros), sent chunked
        # with no Content-Length; `served` counts what got written before the reader left.
        self.streams: dict[str, tuple[bytes, int]] = {}
        self.served: dict[str, int] = {}
        app = web.Application()
        app.router.add_get("/{name:.*}", self._handle)
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        self.base = ""

    async def start(self) -> MediaServer:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        self.base = f"http://127.0.0.1:{self.port}"
        return self

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits.append(name)
        if name in self.slow:
            self.waiting += 1
            try:
                await self.gate.wait()
            finally:
                self.waiting -= 1
        if name in self.redirects:
            raise web.HTTPFound(self.redirects[name])
        if name in self.streams:
            return await self._stream(request, name)
        if name not in self.files:
            raise web.HTTPNotFound()
        body, kind = self.files[name]
        return web.Response(body=body, content_type=kind)

    async def _stream(self, request: web.Request, name: str) -> web.StreamResponse:
        head, total = self.streams[name]
        response = web.StreamResponse(headers={"Content-Type": "image/png"})
        response.enable_chunked_encoding()
        self.served[name] = 0
        try:
            await response.prepare(request)
            while self.served[name] < total:
                done = self.served[name]
                piece = (head[done : done + 65536] if done < len(head) else bytes(65536))[
                    : total - done
                ]
                await response.write(piece)
                self.served[name] = done + len(piece)
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the reader hung up
        return response

    async def close(self) -> None:
        self.gate.set()
        await self.runner.cleanup()


PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
    b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7"
    b"5\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82"
)


class Recorder:
    """The daemon's side in tests: records every message handed in, answers by script."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.reply: Callable[[Any], Any] = lambda message: None
        self.door = Door()  # answers go out through the channel, as the daemon sends them

    async def __call__(self, message: Any) -> None:
        self.messages.put_nowait(message)
        await self.door.answer(message, self.reply(message))

    async def next(self, limit_s: float = 3.0) -> Any:
        async with asyncio.timeout(limit_s):
            return await self.messages.get()


async def eventually(predicate: Callable[[], bool], limit_s: float = 3.0) -> None:
    """Poll a condition with a deadline (never a fixed sleep)."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)
