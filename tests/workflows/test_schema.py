"""The OpenAPI schema is valid, complete, and generated without warnings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.test import Client, override_settings
from openapi_spec_validator import validate

pytestmark = pytest.mark.django_db


def test_the_schema_validates(api: Any) -> None:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = (
        response.json()
        if response["Content-Type"].endswith("json")
        else yaml.safe_load(response.content)
    )
    validate(schema)


def test_the_schema_lists_the_recipe_endpoints(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/schema/").content)

    # Routes take an optional trailing slash; the schema writes it.
    paths = {p.rstrip("/"): item for p, item in schema["paths"].items()}

    assert {
        "/api/actors",
        "/api/actors/{id}",
        "/api/recipes",
        "/api/recipes/import",
        "/api/recipes/{slug}",
        "/api/recipes/{slug}/export",
        "/api/recipes/{slug}/publish",
        "/api/recipes/{slug}/lint",
        "/api/recipes/{slug}/versions",
        "/api/auth/token",
    } <= set(paths)
    assert set(paths["/api/recipes/{slug}"]) >= {"get", "put", "patch", "delete"}
    assert set(paths["/api/actors/{id}"]) >= {"get", "put", "patch", "delete"}


def test_spectacular_validates_without_warnings(tmp_path: Path) -> None:
    # A fresh process: drf-spectacular keeps (and deduplicates) its warnings per process.
    out = tmp_path / "schema.yaml"
    env = {**os.environ, "SECRET_KEY": os.environ.get("SECRET_KEY", "test-only-not-secret")}

    done = subprocess.run(
        [sys.executable, "manage.py", "spectacular", "--validate", "--fail-on-warn",
         "--file", str(out)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr and "Error" not in done.stderr, done.stderr
    validate(yaml.safe_load(out.read_text()))


def test_the_docs_page_loads_for_a_user(api: Any) -> None:
    response = api.get("/api/docs/")

    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_the_docs_page_loads_swagger_ui_from_our_own_static_files(api: Any) -> None:
    page = api.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    static_url = "/" + settings.STATIC_URL.lstrip("/")

    assert {Path(a).name for a in assets} >= {
        "swagger-ui.css",
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
        "favicon-32x32.png",
    }
    assert all(a.startswith(static_url) for a in assets), assets
    assert not re.search(r"https?://|cdn|unpkg|jsdelivr", page, re.IGNORECASE)


@override_settings(WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=True)
def test_the_docs_page_assets_are_served(api: Any) -> None:
    # Served from the app's static folders as collectstatic gathers them; a new client loads
    # WhiteNoise with these settings.
    page = api.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)

    for asset in assets:
        response = Client().get(asset)
        assert response.status_code == 200, asset
        assert b"".join(response.streaming_content), asset


def test_the_schema_is_closed_to_anonymous_callers(anon_api: Any) -> None:
    assert anon_api.get("/api/schema/").status_code in (401, 403)
