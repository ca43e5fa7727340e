"""The console's web layer: one aiohttp sub-application under /console with its guard.

Every request passes `_guard`: a request from another origin is refused (403); anyone
signed out is sent to the sign-in page (303); a POST without its session's CSRF token is
refused (403); every answer says "store nothing" (Cache-Control: no-store) and carries a
Content-Security-Policy that allows only this daemon's own files and no inline script.
The pages themselves (overview.py, chats.py, people.py, settings.py, reminders.py) are
handed in (bot/console/site.py) and add their own routes; what they share is page.py.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from importlib import resources
from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from bot.console.auth import (
    Sessions,
    SignInLimiter,
    csrf_matches,
    password_matches,
)
from bot.console.fmt import format_age, format_time
from bot.console.page import SESSION_KEY, ConsoleDeps, Page, see_other, url
from bot.console.params import PREFIX, BadInput, sign_in_target
from channels.http.guard import SAFE_METHODS, cross_site_reason
from channels.http.server import LARGER_BODIES
from memory.console.activity import Activity
from memory.console.browse import Browse

log = logging.getLogger(__name__)

COOKIE = "chatterd_console"
PRE_COOKIE = "chatterd_console_signin"  # the sign-in form's own CSRF token (double submit)
OPEN_PATHS = {f"{PREFIX}/sign-in"}
CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Console:
    """The operator's console; `register` mounts it on the HTTP channel's application."""

    def __init__(
        self,
        deps: ConsoleDeps,
        password: str,
        pages: Sequence[Page] = (),
        *,
        nav: Sequence[tuple[str, str]] = (),
        uploads: Mapping[str, int] | None = None,
    ) -> None:
        """`pages` add their routes when the console is mounted (bot/console/site.py);
        `nav`: (label, path) links of optional pages; `uploads`: paths that take a larger
        body than the HTTP server's limit, with their limit."""
        self.deps = deps
        self._pages = tuple(pages)
        self._uploads = dict(uploads or {})
        self.browse = Browse(deps.storage.database)
        self.activity = Activity(deps.storage.database)
        self._password = password
        hours = deps.settings.web.session_hours
        self.sessions = Sessions(timedelta(hours=hours), deps.clock)
        self.limiter = SignInLimiter(deps.clock)
        self._secure = deps.settings.web.secure_cookie
        self._templates = Environment(
            loader=PackageLoader("bot.console", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._templates.filters["when"] = format_time
        self._templates.filters["age"] = lambda moment: format_age(moment, deps.clock())
        self._templates.globals["url"] = url
        self._templates.globals["extra_nav"] = tuple(nav)

    def register(self, app: web.Application) -> None:
        """Mount /console (the HTTP channel calls this before it starts serving)."""
        sub = web.Application(middlewares=[self._guard])
        sub.router.add_get("/sign-in", self._sign_in_form)
        sub.router.add_post("/sign-in", self._sign_in)
        sub.router.add_post("/sign-out", self._sign_out)
        sub.router.add_get("/static/{name}", self._static)
        for page in self._pages:
            page(sub.router, self)
        larger = app.get(LARGER_BODIES)
        if larger is not None:
            larger.update({PREFIX + path: size for path, size in self._uploads.items()})
        app.add_subapp(PREFIX, sub)

    # -- rendering ---------------------------------------------------------------------

    def render(self, request: web.Request, template: str, **values: Any) -> web.Response:
        session = request.get(SESSION_KEY)
        notice = session.flash if session is not None else None
        if session is not None:
            session.flash = None
        body = self._templates.get_template(template).render(
            csrf=session.csrf if session is not None else "",
            signed_in=session is not None,
            notice=notice,
            path=request.path,
            bot_name=self.deps.settings.bot.name,
            **values,
        )
        return web.Response(text=body, content_type="text/html")

    def missing(self, request: web.Request, what: str) -> web.Response:
        """404 with a page that says what was not found (and the navigation)."""
        response = self.render(request, "missing.html", what=what)
        response.set_status(404)
        return response

    # -- the guard ---------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == PREFIX:  # the sub-application also answers its bare prefix
            return see_other(url("/"))
        refusal: web.StreamResponse | None = self._foreign(request)
        if refusal is None:
            refusal = await self._check_session(request)
        try:
            response = refusal if refusal is not None else await handler(request)
        except BadInput as exc:  # a crafted page number or redirect target: say so, 400
            response = self.render(request, "bad_request.html", reason=str(exc))
            response.set_status(400)
        except web.HTTPException as exc:  # 404 and the like: plain text, same headers
            if exc.status < 400:
                raise
            response = web.Response(status=exc.status, text=exc.text or exc.reason)
        headers = response.headers
        headers["Cache-Control"] = "no-store"
        headers["Pragma"] = "no-cache"
        headers["Content-Security-Policy"] = CSP
        headers["X-Content-Type-Options"] = "nosniff"
        headers["X-Frame-Options"] = "DENY"
        headers["Referrer-Policy"] = "same-origin"
        return response

    @staticmethod
    def _foreign(request: web.Request) -> web.Response | None:
        """403 for a request another site's page made (channels.http.guard, as the API)."""
        if cross_site_reason(request) is not None:
            return _refuse("Refused: this request came from another site.")
        return None

    async def _check_session(self, request: web.Request) -> web.StreamResponse | None:
        session = self.sessions.find(request.cookies.get(COOKIE))
        if session is not None:
            request[SESSION_KEY] = session
        if request.path in OPEN_PATHS or request.path.startswith(f"{PREFIX}/static/"):
            return None
        if session is None:
            if request.method not in SAFE_METHODS:
                return _refuse("Refused: you are signed out. Sign in and try again.")
            return see_other(url("/sign-in", next=request.path_qs))
        if request.method not in SAFE_METHODS:
            form = await request.post()
            given = form.get("csrf")
            if not isinstance(given, str) or not csrf_matches(session, given):
                return _refuse("Refused: the form's security token is missing or wrong.")
        return None

    # -- sign-in and out ---------------------------------------------------------------

    async def _sign_in_form(self, request: web.Request) -> web.StreamResponse:
        if request.get(SESSION_KEY) is not None:
            return see_other(url("/"))
        return self._sign_in_page(request, error=None)

    def _sign_in_page(
        self, request: web.Request, error: str | None, status: int = 200
    ) -> web.Response:
        token = secrets.token_urlsafe(24)
        response = self.render(
            request, "sign_in.html", error=error, form_token=token, next=_next(request)
        )
        response.set_status(status)
        self._cookie(response, PRE_COOKIE, token, path=f"{PREFIX}/sign-in")
        return response

    async def _sign_in(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        next_given = form.get("next")
        target = sign_in_target(next_given if isinstance(next_given, str) else None)
        expected = request.cookies.get(PRE_COOKIE)
        given = form.get("csrf")
        if not expected or not isinstance(given, str) or given != expected:
            return _refuse("Refused: the form's security token is missing or wrong.")
        address = request.remote or "unknown"
        if self.limiter.blocked(address):
            log.warning("console sign-in refused for %s: too many wrong passwords", address)
            page = self._sign_in_page(
                request, "Too many wrong passwords; wait a few minutes.", status=429
            )
            page.headers["Retry-After"] = str(self.limiter.retry_after_s(address))
            return page
        password = form.get("password")
        if not isinstance(password, str) or not password_matches(password, self._password):
            self.limiter.failed(address)
            log.warning("console sign-in with a wrong password from %s", address)
            return self._sign_in_page(request, "That password is wrong.", status=403)
        session = self.sessions.open()
        log.info("console: signed in from %s", address)
        response = see_other(target or url("/"))
        self._cookie(response, COOKIE, session.token, path=PREFIX)
        response.del_cookie(PRE_COOKIE, path=f"{PREFIX}/sign-in")
        return response

    async def _sign_out(self, request: web.Request) -> web.StreamResponse:
        self.sessions.close(request.cookies.get(COOKIE))
        log.info("console: signed out from %s", request.remote or "unknown")
        response = see_other(url("/sign-in"))
        response.del_cookie(COOKIE, path=PREFIX)
        return response

    def _cookie(self, response: web.StreamResponse, name: str, value: str, *, path: str) -> None:
        response.set_cookie(
            name, value, path=path, httponly=True, samesite="Strict", secure=self._secure
        )

    # -- small routes ------------------------------------------------------------------

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        kinds = {
            "console.css": "text/css",
            "console.js": "text/javascript",
            "favicon.svg": "image/svg+xml",
        }
        if name not in kinds:
            raise web.HTTPNotFound()
        body = resources.files("bot.console").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=kinds[name])


def _next(request: web.Request) -> str:
    return sign_in_target(request.query.get("next"))


def _refuse(reason: str) -> web.Response:
    return web.Response(status=403, text=reason, content_type="text/plain")
