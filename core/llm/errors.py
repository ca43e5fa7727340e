"""What a failed model call means, in our own words.

Every failure becomes an `LLMError` with a coarse `kind` the processor can answer on and
a message that is safe to log: it names the endpoint's host, never the API key or the
server's raw error text (which may echo the key back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import aiohttp
import openai

LLMErrorKind = Literal["timeout", "unavailable", "rate_limited", "bad_request", "auth"]

# Kinds after which another endpoint may well answer the same request.
_ENDPOINT_FAULTS: frozenset[str] = frozenset({"timeout", "unavailable", "rate_limited", "auth"})


class LLMError(Exception):
    """A failed model call. `kind` drives the user's apology; str(exc) is for the log."""

    def __init__(self, kind: LLMErrorKind, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: LLMErrorKind = kind
        self.status = status


def is_endpoint_fault(error: LLMError) -> bool:
    """Whether the endpoint, not the request, is at fault, so another one may answer.

    Timeouts, connection failures, 5xx, 429 after retries and refused keys are the
    endpoint's. A 400-class rejection is the request's own and would fail anywhere,
    except 404 (that endpoint lacks the model or the path) and a request that could not
    even be sent to that endpoint's URL (no status): both are that endpoint's set-up.
    """
    if error.kind in _ENDPOINT_FAULTS:
        return True
    return error.kind == "bad_request" and error.status in (404, None)


def safe_host(base_url: str) -> str:
    """host[:port] of the endpoint, without any user:password@, path or query."""
    try:
        parts = urlsplit(base_url)
        host = parts.hostname or "?"
        return f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "?"


@dataclass(frozen=True)
class Site:
    """One endpoint as its failures name it: `where` is host[:port] (never a key or
    path), `config_key` the section the operator fixes it in; the timeout and retries
    are what the SDK was allowed before it gave up."""

    where: str
    model: str
    timeout_s: float
    max_retries: int
    config_key: str

    @property
    def tries(self) -> str:
        return f"after {self.max_retries + 1} attempt(s)"


def unsendable(site: Site, exc: BaseException) -> LLMError:
    """The transport's own refusal (e.g. user:password@ in base_url), phrased by us."""
    return LLMError(
        "bad_request",
        f"the model call to {site.where} could not be sent ({type(exc).__name__}); "
        f"check {site.config_key} base_url",
    )


def map_sdk_error(exc: openai.OpenAIError, site: Site) -> LLMError:
    """SDK exception -> LLMError, built from our own words only (never exc's text)."""
    where, tries = site.where, site.tries
    if isinstance(exc, openai.APIConnectionError) and refused_or_dropped(exc):
        # The aiohttp transport reports some connection failures as timeouts.
        return LLMError(
            "unavailable",
            f"could not reach the model endpoint at {where}: connection "
            f"refused or closed ({tries})",
        )
    if isinstance(exc, openai.APITimeoutError):
        return LLMError(
            "timeout",
            f"the model endpoint at {where} did not answer within {site.timeout_s:g}s ({tries})",
        )
    if isinstance(exc, openai.APIConnectionError):
        return LLMError("unavailable", f"could not reach the model endpoint at {where} ({tries})")
    if isinstance(exc, openai.APIStatusError):
        return status_error(exc.status_code, site)
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMError("unavailable", f"the model endpoint at {where} sent a malformed answer")
    return LLMError("unavailable", f"the model call to {where} failed ({type(exc).__name__})")


def refused_or_dropped(exc: BaseException) -> bool:
    """Whether the root cause is a refused or closed connection, not a slow server."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    found = False
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, TimeoutError):
            return False
        if isinstance(cause, aiohttp.ClientConnectionError | ConnectionError):
            found = True
        cause = cause.__cause__ or cause.__context__
    return found


def status_error(status: int, site: Site) -> LLMError:
    """An HTTP error status -> LLMError; the server's body is never quoted."""
    where, tries, config_key = site.where, site.tries, site.config_key
    if status == 429:
        return LLMError(
            "rate_limited",
            f"the model endpoint at {where} is rate limiting us (429, {tries})",
            status=status,
        )
    if status in (401, 403):
        return LLMError(
            "auth",
            f"the model endpoint at {where} refused the API key ({status}); "
            f"check {config_key} api_key",
            status=status,
        )
    if status == 404:
        return LLMError(
            "bad_request",
            f"the model endpoint at {where} answered 404: check "
            f"{config_key} base_url and that model {site.model!r} exists",
            status=status,
        )
    if status >= 500 or status in (408, 409):
        return LLMError(
            "unavailable",
            f"the model endpoint at {where} failed with HTTP {status} ({tries})",
            status=status,
        )
    return LLMError(
        "bad_request",
        f"the model endpoint at {where} rejected the request (HTTP {status})",
        status=status,
    )
