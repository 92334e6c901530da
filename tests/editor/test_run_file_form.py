"""The run form's file fields, a run's file downloaded from the editor, and the recipe editor's
fields of a file input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from runner.models import Run, RunFile
from tests import documents
from tests.factories import UserFactory
from tests.runner.test_run_files import blobs, owner, papers  # noqa: F401 (fixtures)
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

FORM = "/recipes/papers/run/"


@pytest.fixture(autouse=True)
def _fresh_rate_counts() -> None:
    cache.clear()


@pytest.fixture
def browser(owner: Any, papers: Recipe) -> Client:  # noqa: F811
    client = Client(raise_request_exception=True)
    client.force_login(owner)
    return client


def test_the_run_form_has_a_file_field_per_file_input(browser: Client) -> None:
    page = browser.get(FORM).content.decode()

    assert 'enctype="multipart/form-data"' in page
    assert 'type="file" name="input_doc"' in page
    assert 'accept="application/pdf,text/plain,image/*,' in page
    assert 'data-max-bytes="200000"' in page
    assert 'name="input_extras"' in page and "multiple" in page
    assert "file-drop.js" in page


def test_a_pdf_uploaded_in_the_run_form_starts_the_run(browser: Client) -> None:
    pdf = documents.pdf(["Hello", "World"])

    answer = browser.post(
        FORM,
        {
            "input_doc": SimpleUploadedFile("report.pdf", pdf, "application/pdf"),
            "input_extras": [
                SimpleUploadedFile("a.txt", b"a", "text/plain"),
                SimpleUploadedFile("b.png", documents.png(), "image/png"),
            ],
            "input_note": "brief",
        },
    )

    assert answer.status_code == 302, answer.content.decode()[-2000:]
    run = Run.objects.get()
    assert answer["Location"] == f"/runs/{run.pk}/"
    assert run.inputs["doc"]["pages"] == 2
    assert [f.name for f in RunFile.objects.filter(run=run, input_name="extras")] == [
        "a.txt",
        "b.png",
    ]


def test_a_refused_file_is_shown_next_to_its_field_and_nothing_is_stored(
    browser: Client,
) -> None:
    before = blobs()

    answer = browser.post(
        FORM, {"input_doc": SimpleUploadedFile("x.pdf", documents.encrypted_pdf())}
    )

    assert answer.status_code == 400
    page = answer.content.decode()
    assert "x.pdf: the PDF is encrypted" in page
    field = page[page.index('name="input_doc"') :]
    assert field.index("the PDF is encrypted") < field.index("</div>")
    assert not Run.objects.exists() and blobs() == before


def test_the_form_refuses_uploads_beyond_the_rate(browser: Client) -> None:
    with override_settings(RUN_FILE_UPLOADS_PER_MINUTE=1):
        browser.post(FORM, {"input_doc": SimpleUploadedFile("a.txt", b"a", "text/plain")})
        answer = browser.post(FORM, {"input_doc": SimpleUploadedFile("b.txt", b"b")})

    assert answer.status_code == 429
    assert "at most 1 files may be uploaded a minute" in answer.content.decode()
    assert Run.objects.count() == 1


def test_a_runs_file_downloads_from_the_editor_to_those_who_see_the_run(
    browser: Client,
) -> None:
    browser.post(FORM, {"input_doc": SimpleUploadedFile("r.pdf", documents.pdf(["x"]))})
    stored = RunFile.objects.get()
    url = f"/runs/{stored.run_id}/files/{stored.pk}/"

    got = browser.get(url)

    assert got.status_code == 200
    assert got["Content-Type"] == "application/pdf"
    assert got["Content-Disposition"] == 'attachment; filename="r.pdf"'
    assert got["X-Content-Type-Options"] == "nosniff"
    assert b"".join(got.streaming_content) == Path(stored.blob.path).read_bytes()
    other = Client()
    other.force_login(UserFactory(username="mallory"))
    assert other.get(url).status_code == 404
    assert Client().get(url).status_code == 302  # to the login page


def test_the_recipe_editor_sets_a_file_inputs_accept_and_limits(
    papers: Recipe,  # noqa: F811
) -> None:
    from editor.forms.recipe import RecipeSettings
    from tests.runner.test_run_files import papers_document

    document = papers_document()
    settings = RecipeSettings(document, data=None)
    doc_form = settings.inputs.forms[0]
    assert doc_form.initial["accept"].startswith("application/pdf, text/plain, image/*")
    assert doc_form.initial["max_bytes"] == 200_000

    data = {
        "recipe-name": "Papers",
        "recipe-description": "",
        "inputs-TOTAL_FORMS": "2",
        "inputs-INITIAL_FORMS": "2",
        "inputs-0-name": "scan",
        "inputs-0-type": "files",
        "inputs-0-accept": "image/png, application/pdf",
        "inputs-0-max_bytes": "5000",
        "inputs-0-max_files": "3",
        "inputs-1-name": "note",
        "inputs-1-type": "string",
        "inputs-1-max_bytes": "10",
        "actors-TOTAL_FORMS": "1",
        "actors-INITIAL_FORMS": "1",
        "actors-0-alias": "writer",
        "actors-0-reference": "papers-writer",  # the actor `papers` made
        "budget-max_tokens": "",
    }
    refused = RecipeSettings(document, data=data)
    assert not refused.is_valid()
    assert refused.inputs.forms[1].errors["max_bytes"] == ["Only a file or files input takes this."]

    data["inputs-1-max_bytes"] = ""
    accepted = RecipeSettings(document, data=data)
    assert accepted.is_valid(), (accepted.inputs.errors, accepted.form.errors)
    assert accepted.result is not None
    assert accepted.result["inputs"]["scan"] == {
        "type": "files",
        "accept": ["image/png", "application/pdf"],
        "max_bytes": 5000,
        "max_files": 3,
    }


def form_post(client: Client, url: str, parts: list[tuple[str, str | None, bytes]]) -> Any:
    """POST a multipart form as a browser would, file names as given (the test client's
    encoder keeps only a name's last part). Each part: field, file name (None: a plain field),
    content."""
    boundary = "----branchline-form-boundary"
    body = b""
    for field, name, data in parts:
        disposition = f'form-data; name="{field}"'
        if name is not None:
            disposition += f'; filename="{name}"\r\nContent-Type: application/octet-stream'
        body += (
            f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode(
                "utf-8", "surrogatepass"
            )
            + data
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    return client.generic(
        "POST", url, body, content_type=f"multipart/form-data; boundary={boundary}"
    )


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("../etc/passwd.txt", "may not hold a path"),
        ("a/b.txt", "may not hold a path"),
        ("C:\\fakepath\\a.txt", "may not hold a path"),
        ("nul\x00.txt", "control characters"),
        ("tab\t.txt", "control characters"),
    ],
)
def test_the_run_form_refuses_a_file_name_as_the_api_does_not_cleaned(
    browser: Client, name: str, said: str
) -> None:
    before = blobs()

    answer = form_post(browser, FORM, [("input_doc", name, b"some text")])

    assert answer.status_code == 400
    page = answer.content.decode()
    field = page[page.index('name="input_doc"') :]
    assert said in field[: field.index("</div>")]
    assert not Run.objects.exists() and not RunFile.objects.exists() and blobs() == before


def test_the_run_form_checks_csrf_once_its_uploads_are_bounded(owner: Any, papers: Any) -> None:  # noqa: F811
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    token = client.get(FORM).cookies["csrftoken"].value

    refused = form_post(client, FORM, [("input_doc", "a.txt", b"alpha")])
    started = form_post(
        client, FORM, [("csrfmiddlewaretoken", None, token.encode()), ("input_doc", "a.txt", b"a")]
    )

    assert refused.status_code == 403
    assert started.status_code == 302, started.content.decode()[-2000:]
    assert Run.objects.get().files.get().name == "a.txt"


def test_the_run_form_refuses_files_over_the_request_bound(browser: Client) -> None:
    with override_settings(RUN_UPLOAD_MAX_BYTES=1_000):
        answer = form_post(
            browser,
            FORM,
            [("input_doc", "a.txt", b"a" * 600), ("input_extras", "b.txt", b"b" * 600)],
        )

    assert answer.status_code == 413
    assert "the files of one request are at most 1,000 bytes together" in (answer.content.decode())
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_the_run_form_still_refuses_a_field_the_database_cannot_hold(browser: Client) -> None:
    answer = form_post(
        browser, FORM, [("input_note", None, b"a\x00b"), ("input_doc", "a.txt", b"a")]
    )

    assert answer.status_code == 400
    assert not Run.objects.exists()


def test_the_test_run_panel_keeps_a_file_name_as_sent(browser: Client) -> None:
    answer = form_post(
        browser,
        "/recipes/papers/testrun/",
        [("start", None, b"1"), ("input_doc", "../up.txt", b"text")],
    )

    assert answer.status_code == 200
    assert "may not hold a path" in answer.content.decode()
    assert not Run.objects.exists()


@pytest.mark.parametrize("url", [FORM, "/recipes/papers/testrun/"])
def test_a_urlencoded_post_to_a_page_that_takes_uploads_is_read_as_ever(
    browser: Client, url: str
) -> None:
    # The door reads such a form before the view: no upload handler to put in place then.
    answer = browser.post(url, "input_note=hello", content_type="application/x-www-form-urlencoded")

    assert answer.status_code in (200, 400)
    assert "input_doc" in answer.content.decode()
    assert not Run.objects.exists()
