"""The door every HTTP request goes through, and the answers to what DRF does not handle.

- Each request gets an id: a well-formed incoming `X-Request-ID` (a proxy's) is kept, any other
  is replaced; every response carries it, and every failure logged here names it.
- Text the database cannot hold (`workflows.validators.text_problem`: NUL, lone surrogates) in
  the address, a cookie, the Authorization header, any query parameter, or a page's form post
  is a 400 naming the field (`RefuseUnstorableCredentials` does the same for websockets). A
  page taking files for a run reads its form itself, its uploads bounded, and checks its
  fields then (`runner.multipart.reads_its_own_upload`).
  API bodies are checked by their parsers (`workflows/apis/parsers.py`), which also read
  the API's PUT and PATCH forms.
- An unhandled exception is a 500, and an unreachable database or broker a 503 with
  `Retry-After`: under /api/ in the API's error shape `{"errors": ["$: …"], "request_id"}`,
  elsewhere a short HTML page; never a traceback or an error's own text, which may name
  hosts and users.

The handlers at the end are the URLconf's handler400/403/404/500 (config/urls.py): the same
answers for errors raised outside views (in a middleware) and for unknown API addresses.
"""

from __future__ import annotations

import logging
import re
import sys
import uuid
from importlib import import_module
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from channels.auth import get_user
from django.conf import settings
from django.core import signals
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.core.handlers.exception import response_for_exception
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.cookie import parse_cookie
from django.http.multipartparser import MultiPartParserError
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve
from django.views import defaults

from runner.multipart import READS_ITS_OWN_UPLOAD, UnstorableFields
from runner.outages import BROKER_ERRORS, DATABASE_ERRORS
from workflows.validators import fields_errors, text_problem

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-ID"
# What a proxy's id looks like (a UUID, a hex or base32 token): nothing that could forge a log
# line or a header.
_WELL_FORMED_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# How long a client should wait before retrying after a 503: the pool's and the broker's own
# timeouts are a few seconds, and so is a database restart.
RETRY_AFTER_SECONDS = 5
# Exceptions that Django turns into 4xx answers itself (through the handlers below).
_ANSWERED_BY_DJANGO = (
    Http404,
    PermissionDenied,
    BadRequest,
    SuspiciousOperation,
    MultiPartParserError,
)
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def is_api(request: HttpRequest) -> bool:
    """Return whether the request is addressed to the API (JSON errors)."""
    return request.path_info == "/api" or request.path_info.startswith("/api/")


def request_id(request: HttpRequest) -> str:
    """Return the request's id (set by RequestMiddleware)."""
    return getattr(request, "request_id", "")


def _incoming_id(request: HttpRequest) -> str:
    given = request.headers.get(REQUEST_ID_HEADER, "")
    return given if _WELL_FORMED_ID.fullmatch(given) else uuid.uuid4().hex


class RequestMiddleware:
    """Give the request its id, refuse text the database cannot hold, answer failures.

    Listed first in MIDDLEWARE, so that every response (a redirect, an error) gets the id.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        request.request_id = _incoming_id(request)  # type: ignore[attr-defined]
        response = self._refusal(request) or self.get_response(request)
        response[REQUEST_ID_HEADER] = request.request_id  # type: ignore[attr-defined]
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = _incoming_id(request)  # type: ignore[attr-defined]
        if _reads_form(request):
            # Parsing a form post reads the body (an upload, maybe): not on the event loop.
            refusal = await sync_to_async(self._refusal, thread_sensitive=True)(request)
        else:
            refusal = self._refusal(request)
        response = refusal or await self.get_response(request)
        response[REQUEST_ID_HEADER] = request.request_id  # type: ignore[attr-defined]
        return response

    def _refusal(self, request: HttpRequest) -> HttpResponse | None:
        try:
            errors = _unstorable_text(request)
        except Exception as exc:  # a form post Django cannot read: its own 400
            return response_for_exception(request, exc)
        return _refused(request, errors) if errors else None

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        """Answer an exception that escaped a view: an outage anywhere, anything under /api/.

        A page's other failures go on to Django (handler500 below, or the debug page).
        """
        if isinstance(exc, UnstorableFields):
            return _refused(request, exc.errors)  # the door's answer, given by the view
        if isinstance(exc, _ANSWERED_BY_DJANGO):
            return None
        if not (is_api(request) or _outage(exc)):
            return None
        # What Django sends for an exception it does not handle (error reporters listen).
        signals.got_request_exception.send(sender=None, request=request)
        return failure_response(request, exc)


def _refused(request: HttpRequest, errors: list[str]) -> HttpResponse:
    where = request.path_info.encode("unicode_escape", "backslashreplace").decode()
    log.warning(
        "request %s: refused %s %s: %s",
        request_id(request),
        request.method,
        where,
        "; ".join(errors),
    )
    return error_response(request, 400, errors)


def _reads_form(request: HttpRequest) -> bool:
    content_type = request.content_type or ""
    return (
        request.method == "POST"
        and content_type in _FORM_TYPES
        and not is_api(request)
        and not _reads_its_own_upload(request)
    )


def _reads_its_own_upload(request: HttpRequest) -> bool:
    """A page that takes files for a run reads its upload itself, bounded, and checks its fields
    then (`runner.multipart.reads_its_own_upload`): the body is not read here."""
    if request.content_type != "multipart/form-data":
        return False
    try:
        view = resolve(request.path_info).func
    except Resolver404:
        return False
    return bool(getattr(view, READS_ITS_OWN_UPLOAD, False))


def _unstorable_text(request: HttpRequest) -> list[str]:
    if problem := text_problem(request.path_info):
        return [f"$: the address {problem}"]
    # Credentials are looked up in the database too (a quoted cookie may even spell a NUL as
    # an octal escape), before any view runs.
    errors = credential_errors(request.COOKIES, request.headers.get("Authorization", ""))
    errors += fields_errors(request.GET)
    if _reads_form(request):
        errors += fields_errors(request.POST)
    return errors


def credential_errors(cookies: dict[str, str], authorization: str) -> list[str]:
    """Return `where: problem` for cookies and an Authorization value the database cannot hold."""
    errors = [
        f"cookies.{name}: {problem}"
        for name, value in cookies.items()
        if (problem := text_problem(name + value))
    ]
    if problem := text_problem(authorization):
        errors.append(f"headers.Authorization: {problem}")
    return errors


class RefuseUnstorableCredentials:
    """ASGI middleware for websockets: refuse, before the session is looked up, a handshake
    whose cookies or Authorization hold text the database cannot hold (close 4400)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers", ()))
        cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin-1"))
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        if credential_errors(cookies, authorization):
            await send({"type": "websocket.close", "code": 4400})
            return None
        return await self.app(scope, receive, send)


class SessionUser:
    """ASGI middleware for websockets: `scope["user"]`, the user of the handshake's session
    cookie (anonymous without one), looked up once.

    channels' AuthMiddlewareStack does the same lookup, and also wraps every message the
    consumer sends to save the session if it changed: sockets never change it, and the checks
    cost each frame a little, a hundred times over when a run has a hundred watchers.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers", ()))
        cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin-1"))
        store = import_module(settings.SESSION_ENGINE).SessionStore
        session = store(cookies.get(settings.SESSION_COOKIE_NAME))
        scope = {**scope, "cookies": cookies, "session": session}
        scope["user"] = await get_user(scope)
        return await self.app(scope, receive, send)


def _outage(exc: BaseException) -> str | None:
    if isinstance(exc, DATABASE_ERRORS):
        return "the database"
    if isinstance(exc, BROKER_ERRORS):
        return "the message broker"
    return None


def error_response(request: HttpRequest, status: int, errors: list[str]) -> HttpResponse:
    """Answer with `errors` (`path: message`): JSON under /api/, a short page elsewhere."""
    if is_api(request):
        return JsonResponse({"errors": errors, "request_id": request_id(request)}, status=status)
    response = HttpResponse(status=status)
    page = {
        "status": status,
        "title": response.reason_phrase,
        "message": " ".join(e.removeprefix("$: ") for e in errors),
        "request_id": request_id(request),
    }
    response.content = render_to_string("error.html", page)
    return response


def failure_response(request: HttpRequest, exc: BaseException) -> HttpResponse:
    """Log `exc` with the request's id and answer 503 for an outage, 500 for anything else."""
    rid = request_id(request)
    service = _outage(exc)
    if service is not None:
        log.warning(
            "request %s: %s %s: %s is unreachable: %s: %s",
            rid,
            request.method,
            request.path,
            service,
            type(exc).__name__,
            exc,
        )
        message = f"$: {service} is unreachable; try again in {RETRY_AFTER_SECONDS} seconds"
        response = error_response(request, 503, [message])
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    else:
        log.error(
            "request %s: %s %s failed",
            rid,
            request.method,
            request.path,
            exc_info=(type(exc), exc, exc.__traceback__),
        )
        message = f"$: the server failed; quote request id {rid} when you report it"
        response = error_response(request, 500, [message])
    response._has_been_logged = True  # type: ignore[attr-defined]  # above, with its id
    return response


# ---------------------------------------------------------------------------------------------
# The URLconf's error handlers


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Answer a request Django found malformed (handler400)."""
    if is_api(request):
        return error_response(request, 400, ["$: the request is malformed"])
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Answer a request refused outside DRF (handler403)."""
    if is_api(request):
        return error_response(request, 403, ["$: you may not do this"])
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Answer an address nothing serves (handler404)."""
    if is_api(request):
        return error_response(request, 404, ["$: no such address"])
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Answer an exception no view or middleware handled (handler500): a 503 if it was an
    outage. Django calls this while handling the exception."""
    exc = sys.exc_info()[1]
    if exc is None:  # called directly: nothing to log
        exc = RuntimeError("handler500 called without an exception")
    return failure_response(request, exc)
