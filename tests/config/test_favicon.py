"""The site's icon: linked from every page, and at /favicon.ico, where browsers look for it."""

from __future__ import annotations

from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.test import Client


def test_it_sends_favicon_ico_to_the_static_icon(db: None) -> None:
    response = Client().get("/favicon.ico")

    assert response.status_code == 301
    assert response["Location"] == static("favicon.ico") == "/static/favicon.ico"
    path = finders.find("favicon.ico")
    assert path is not None
    with open(path, "rb") as icon:
        assert icon.read(4) == b"\x00\x00\x01\x00"  # an ICO file's header


def test_every_page_links_the_icons(db: None) -> None:
    html = Client().get("/login/").content.decode()

    for name in ("favicon.svg", "favicon.ico"):
        assert f'rel="icon" href="{static(name)}"' in html
        assert finders.find(name) is not None
