"""The SSRF guard on provider base URLs, raising the providers' errors.

The guard itself lives in ``workflows/actor_urls.py``, where actors are checked when they are
written; the providers check again with it when they call, and when they connect (DNS
answers change). Its refusals become ProviderConfigError here (never retryable), except a
name that stops resolving at connect time, which is a retryable ProviderError.
"""

from __future__ import annotations

from collections.abc import Sequence

from workflows.actor_urls import (
    DEFAULT_ALLOWLIST,
    Allowlist,
    BaseURL,
    NameUnresolved,
    URLRefused,
    address_problem,
    settings_allowlist,
)
from workflows.actor_urls import check_base_url as _check_base_url
from workflows.actor_urls import connect_addresses as _connect_addresses

from .base import ProviderConfigError, ProviderError

__all__ = [
    "DEFAULT_ALLOWLIST",
    "Allowlist",
    "BaseURL",
    "address_problem",
    "check_base_url",
    "connect_addresses",
    "parse_allowlist",
    "settings_allowlist",
    "validate_base_url",
]


def parse_allowlist(entries: Sequence[str] | Allowlist) -> Allowlist:
    """Return the parsed allowlist, or raise ProviderConfigError naming the bad entry."""
    try:
        return Allowlist.parse(entries)
    except URLRefused as exc:
        raise ProviderConfigError(str(exc)) from None


def check_base_url(url: str, *, allowlist: Sequence[str] | Allowlist) -> BaseURL:
    """Return the checked parts of ``url``, or raise ProviderConfigError saying why not."""
    try:
        return _check_base_url(url, allowlist=allowlist)
    except URLRefused as exc:
        raise ProviderConfigError(str(exc)) from None


def validate_base_url(url: str, *, allowlist: Sequence[str] | Allowlist) -> str:
    """Return ``url`` normalised, or raise ProviderConfigError saying why it is refused."""
    return check_base_url(url, allowlist=allowlist).url


def connect_addresses(host: str, port: int, allowlist: Allowlist) -> list[str] | None:
    """Return the checked addresses to connect to for ``host``, or None to connect by name.

    A refused address is a ProviderConfigError; a name that does not resolve (now) is a
    retryable ProviderError.
    """
    try:
        return _connect_addresses(host, port, allowlist)
    except NameUnresolved as exc:
        raise ProviderError(str(exc), retryable=True) from None
    except URLRefused as exc:
        raise ProviderConfigError(str(exc)) from None
