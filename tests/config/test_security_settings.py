"""HTTPS settings from the environment: off on plain http by default, and `check --deploy` clean
with a production environment behind a TLS-terminating proxy. Settings are read once per
process, so each case starts a fresh interpreter."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
SECURITY_VARIABLES = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_SSL_REDIRECT",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
)
PRODUCTION = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "branchline.example.com",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
}
SHOW_SETTINGS = """
import json
import django
django.setup()
from django.conf import settings
names = ["SECURE_PROXY_SSL_HEADER", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE",
         "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
         "SECURE_HSTS_PRELOAD"]
print(json.dumps({name: getattr(settings, name) for name in names}))
"""


def fresh_process(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """Run `args` with the test run's environment, less its security settings, plus `env`."""
    environment = {k: v for k, v in os.environ.items() if k not in SECURITY_VARIABLES}
    environment.update(DJANGO_SETTINGS_MODULE="config.settings", **env)
    environment.setdefault("SECRET_KEY", "settings-tests-only")
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def security_settings(**env: str) -> dict[str, Any]:
    done = fresh_process(["-c", SHOW_SETTINGS], **env)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_check_deploy_is_clean_with_the_production_environment() -> None:
    secret_key = secrets.token_urlsafe(48)[:50]  # 50 random characters

    done = fresh_process(
        ["manage.py", "check", "--deploy", "--fail-level", "DEBUG"],
        **PRODUCTION,
        SECRET_KEY=secret_key,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "System check identified no issues (0 silenced).", done.stdout
    assert done.stderr == ""


def test_plain_http_on_localhost_is_the_default() -> None:
    assert security_settings() == {
        "SECURE_PROXY_SSL_HEADER": None,
        "SECURE_SSL_REDIRECT": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
    }


def test_redirecting_to_https_makes_the_cookies_secure_unless_told_otherwise() -> None:
    assert security_settings(SECURE_SSL_REDIRECT="1") == {
        "SECURE_PROXY_SSL_HEADER": None,
        "SECURE_SSL_REDIRECT": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_HSTS_PRELOAD": False,
    }
    insecure = security_settings(SECURE_SSL_REDIRECT="1", CSRF_COOKIE_SECURE="0")
    assert (insecure["SESSION_COOKIE_SECURE"], insecure["CSRF_COOKIE_SECURE"]) == (True, False)


@pytest.mark.parametrize(
    "written", ["X-Forwarded-Proto", "x-forwarded-proto", "HTTP_X_FORWARDED_PROTO"]
)
def test_the_proxy_header_is_a_header_name_in_either_spelling(written: str) -> None:
    found = security_settings(SECURE_PROXY_SSL_HEADER=written)["SECURE_PROXY_SSL_HEADER"]

    assert found == ["HTTP_X_FORWARDED_PROTO", "https"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"}, "a header name"),
        ({"SECURE_PROXY_SSL_HEADER": "X Forwarded Proto"}, "a header name"),
        ({"SECURE_HSTS_SECONDS": "-1"}, "SECURE_HSTS_SECONDS is a number of seconds"),
        ({"SECURE_HSTS_SECONDS": "a year"}, "invalid literal for int()"),
        ({"SECURE_SSL_REDIRECT": "maybe"}, "SECURE_SSL_REDIRECT"),
    ],
)
def test_a_bad_value_stops_the_start_with_a_clear_error(env: dict[str, str], message: str) -> None:
    done = fresh_process(["-c", SHOW_SETTINGS], **env)

    assert done.returncode != 0
    assert message in done.stderr


# In this process: the middleware reads these settings when the client loads it.


@pytest.mark.django_db
def test_behind_the_proxy_http_is_redirected_and_https_is_served(settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    client = Client()

    plain = client.get("/login/", HTTP_X_FORWARDED_PROTO="http")
    secure = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")

    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/login/"
    assert plain["X-Request-ID"]
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=3600"
