"""`Idempotency-Key` on requests that start something: a repeat gets the first answer back.

A client that lost the answer to a run start or a decision (a timeout, a dropped connection)
sends the same request again with the same key, and nothing is done twice. The key is stored in
the transaction of what the request does, so it exists exactly when that happened; it is
inserted first, so that a request with a key already used (or in use: the insert waits for its
holder to commit) meets it at its unique constraint and answers as the first did. Only
successful answers are kept: a request that was refused did nothing, and may be sent again once
its cause is fixed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from .models import IdempotentRequest

HEADER = "Idempotency-Key"
KEEP_FOR = timedelta(hours=24)
MAX_KEY_LENGTH = 255


def respond_once(request: Request, action: Callable[[], Response]) -> Response:
    """Return `action()`'s answer, or the first answer to an earlier request with this key."""
    key = request.headers.get(HEADER)
    if key is None:
        return action()
    if not key or len(key) > MAX_KEY_LENGTH or not all("!" <= c <= "~" for c in key):
        return _error(
            status.HTTP_400_BAD_REQUEST,
            f"{HEADER}: 1 to {MAX_KEY_LENGTH} visible ASCII characters",
        )
    fingerprint = _fingerprint(request)
    for _ in range(2):  # a second try if the first holder of the key gave it up meanwhile
        try:
            with transaction.atomic():
                record = IdempotentRequest.objects.create(
                    user=request.user, key=key, fingerprint=fingerprint
                )
                response = action()
                if not status.is_success(response.status_code):
                    transaction.set_rollback(True)
                    return response
                record.status_code, record.response = response.status_code, response.data
                record.save(update_fields=["status_code", "response"])
                return response
        except IntegrityError:
            pass  # the key was taken: the insert waited for its holder to commit
        earlier = IdempotentRequest.objects.filter(user=request.user, key=key).first()
        if earlier is not None:
            return _replay(earlier, fingerprint)
    return _error(status.HTTP_409_CONFLICT, f"{HEADER}: a request with this key is in progress")


def forget_old_keys(*, now: object = None) -> int:
    """Delete keys older than KEEP_FOR; return how many."""
    cutoff = (now or timezone.now()) - KEEP_FOR  # type: ignore[operator]
    deleted, _ = IdempotentRequest.objects.filter(created_at__lt=cutoff).delete()
    return deleted


def _replay(earlier: IdempotentRequest, fingerprint: str) -> Response:
    if earlier.fingerprint != fingerprint:
        return _error(
            status.HTTP_422_UNPROCESSABLE_ENTITY,
            f"{HEADER}: this key was used for a different request",
        )
    response = Response(earlier.response, status=earlier.status_code)
    response["Idempotent-Replayed"] = "true"
    return response


def _fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, cls=DjangoJSONEncoder, default=str)
    text = f"{request.method} {request.path}\n{body}\n{_uploads_digest(request)}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _uploads_digest(request: Request) -> str:
    """The files a multipart request uploads, by field and content (another file under the same
    key is another request)."""
    files = request.FILES
    digests = []
    for field in sorted(files):
        for uploaded in files.getlist(field):
            digest = hashlib.sha256()
            for chunk in uploaded.chunks():
                digest.update(chunk)
            uploaded.seek(0)
            digests.append(f"{field}:{digest.hexdigest()}")
    return " ".join(digests)


def _error(code: int, message: str) -> Response:
    return Response({"errors": [message]}, status=code)
