"""Answer DNS lookups of chosen names in tests (a name that rebinds, a name for loopback)."""

from __future__ import annotations

import socket
from typing import Any

import pytest


def fake_resolver(
    monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]
) -> list[str]:
    """Make getaddrinfo answer the given names from a list of answers (the last repeats);
    return the list of names asked, in order."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in answers:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        addresses = answers[host][min(asked.count(host), len(answers[host])) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked
