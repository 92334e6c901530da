"""Files given to runs: uploads through the API (multipart and base64 JSON), checked, read and
stored with the run; refused with nothing stored; served to those who may see the run only."""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.storage import storages
from django.test import override_settings
from rest_framework.test import APIClient

from runner import services
from runner.models import Run, RunFile
from runner.run_files import Upload
from tests import documents
from tests.conftest import api_client
from tests.factories import ActorFactory, UserFactory
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

pytestmark = pytest.mark.django_db

RUNS = "/api/recipes/papers/runs"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def papers_document() -> dict[str, Any]:
    return {
        "format": "branchline.recipe/v1",
        "slug": "papers",
        "name": "Papers",
        "inputs": {
            "doc": {
                "type": "file",
                "required": True,
                "accept": ["application/pdf", "text/plain", "image/*", DOCX],
                "max_bytes": 200_000,
            },
            "extras": {"type": "files", "max_files": 2},
            "note": {"type": "string"},
            "count": {"type": "integer"},
        },
        "actors": {"writer": "papers-writer"},
        "steps": [
            {
                "key": "read",
                "name": "Read",
                "kind": "llm",
                "actor": "writer",
                "prompt": "Read it. {note}",
                "branches": [
                    {
                        "name": "done",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "QUALITY_APPROVED",
                        "target": "@complete",
                    }
                ],
            }
        ],
    }


@pytest.fixture(autouse=True)
def _fresh_rate_counts() -> None:
    cache.clear()


@pytest.fixture
def owner(db: None) -> Any:
    return UserFactory(username="olivia")


@pytest.fixture
def papers(owner: Any) -> Recipe:
    ActorFactory(name="papers-writer", config={"replies": ["read"]})
    recipe = recipe_import(user=owner, data=papers_document()).recipe
    recipe_publish(recipe=recipe, user=owner)
    return recipe


@pytest.fixture
def client(owner: Any, papers: Recipe) -> APIClient:
    return api_client(owner)


def blobs() -> set[Path]:
    root = Path(storages["run_files"].location)
    return {path for path in root.rglob("*") if path.is_file()}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def upload(name: str, data: bytes, media_type: str = "application/octet-stream") -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type=media_type)


def test_a_multipart_upload_starts_a_run_with_a_ref_and_its_file_stored(
    client: APIClient,
) -> None:
    pdf = documents.pdf(["First page", f"Card {documents.VALID_CARD}"], images_on=[2])
    before = blobs()

    answer = client.post(
        RUNS,
        {"doc": upload("report.pdf", pdf), "note": "Be brief", "count": "3"},
        format="multipart",
    )

    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    stored = RunFile.objects.get(run=run)
    ref = run.inputs["doc"]
    assert ref == {
        "file": str(stored.id),
        "name": "report.pdf",
        "media_type": "application/pdf",
        "size": len(pdf),
        "pages": 2,
        "image_count": 1,
    }
    assert run.inputs["note"] == "Be brief" and run.inputs["count"] == 3
    assert stored.pages == ["First page", f"Card {documents.VALID_CARD}"]
    assert stored.blob.read() == pdf
    assert len(blobs() - before) == 1
    # The bytes never enter the state, the events or the answer.
    assert "content_base64" not in str(run.state) and b64(pdf)[:40] not in str(run.state)
    (listed,) = answer.json()["files"]
    assert listed["id"] == str(stored.id) and listed["pages"] == 2


def test_a_files_input_takes_several_uploads_in_order(client: APIClient) -> None:
    answer = client.post(
        RUNS,
        {
            "doc": upload("a.txt", b"alpha"),
            "extras": [upload("one.png", documents.png()), upload("two.txt", b"two")],
        },
        format="multipart",
    )

    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert [ref["name"] for ref in run.inputs["extras"]] == ["one.png", "two.txt"]
    image = RunFile.objects.get(run=run, input_name="extras", position=0)
    assert (image.media_type, image.width, image.height, image.image_count) == (
        "image/png",
        64,
        48,
        1,
    )


def test_a_json_body_gives_a_file_in_base64(client: APIClient) -> None:
    body = {
        "inputs": {
            "doc": {"name": "notes.txt", "content_base64": b64(b"Hello there"), "media_type": "x"}
        }
    }

    answer = client.post(RUNS, body, format="json")

    assert answer.status_code == 201, answer.content
    run = Run.objects.get(pk=answer.json()["id"])
    assert run.inputs["doc"]["media_type"] == "text/plain"
    assert RunFile.objects.get(run=run).text == "Hello there"


def test_multipart_inputs_may_come_as_one_json_field(client: APIClient) -> None:
    answer = client.post(
        RUNS,
        {"doc": upload("a.txt", b"alpha"), "inputs": '{"note": "hi", "count": 2}'},
        format="multipart",
    )

    assert answer.status_code == 201, answer.content
    inputs = Run.objects.get(pk=answer.json()["id"]).inputs
    assert (inputs["note"], inputs["count"]) == ("hi", 2)


def post_multipart(client: APIClient, url: str, files: dict[str, tuple[str, bytes]]) -> Any:
    """POST files as a browser would, their names as given (the test client's encoder keeps
    only a name's last path part)."""
    boundary = "----branchline-test-boundary"
    body = b""
    for field, (name, data) in files.items():
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
                f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode("utf-8", "surrogatepass")
            + data
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    return client.generic(
        "POST", url, body, content_type=f"multipart/form-data; boundary={boundary}"
    )


def docx_bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", b"<w:document/>")
        archive.writestr("word/media/huge.bin", b"\0" * (60 * 1024 * 1024))
    return out.getvalue()


def zip_archive() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("inner.txt", "x" * 10_000)
    return out.getvalue()


BAD_UPLOADS = [
    ("big.txt", b"a" * 200_001, "200,000 bytes"),
    ("page.html", b"<html><body>hi</body></html>", "is text/html; this input takes"),
    ("secret.pdf", documents.encrypted_pdf(), "encrypted"),
    ("broken.pdf", b"%PDF-1.7\n1 0 obj <<", "the PDF cannot be read"),
    ("bomb.pdf", zip_archive(), "is not a PDF (it is a zip archive)"),
    ("inflating.pdf", documents.inflating_pdf(), "(it may be a zip bomb)"),
    ("huge.png", documents.huge_png(), "decompression bomb"),
    ("../etc/passwd.txt", b"root", "may not hold a path"),
    ("a/b.txt", b"text", "may not hold a path"),
    ("nul\x00.txt", b"text", "control characters"),
    ("empty.txt", b"", "empty"),
]


@pytest.mark.parametrize(("name", "data", "said"), BAD_UPLOADS, ids=[b[0] for b in BAD_UPLOADS])
@pytest.mark.parametrize("via", ["multipart", "json"])
def test_a_bad_upload_is_a_400_naming_the_input_with_nothing_stored(
    client: APIClient, name: str, data: bytes, said: str, via: str
) -> None:
    before = blobs()
    if via == "multipart":
        answer = post_multipart(client, RUNS, {"doc": (name, data)})
    else:
        body = {"inputs": {"doc": {"name": name, "content_base64": b64(data)}}}
        answer = client.post(RUNS, body, format="json")

    assert answer.status_code == 400, answer.content
    (error,) = answer.json()["errors"]
    if via == "json" and "\x00" in name:
        # The API refuses a NUL anywhere in JSON text, naming where it is.
        assert error == "inputs.doc.name: contains a NUL character"
    else:
        assert error.startswith("inputs.doc: ") and said in error, error
    assert not Run.objects.exists() and not RunFile.objects.exists()
    assert blobs() == before


def test_a_docx_bomb_is_refused_before_it_is_unpacked(client: APIClient) -> None:
    body = {"inputs": {"doc": {"name": "bomb.docx", "content_base64": b64(docx_bomb())}}}

    with override_settings(RUN_FILE_MAX_BYTES=10_000_000):
        answer = client.post(RUNS, {**body}, format="json")

    assert answer.status_code == 400, answer.content
    (error,) = answer.json()["errors"]
    assert error.startswith("inputs.doc: ") and "zip bomb" in error, error
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_a_ref_made_by_the_client_is_refused(client: APIClient, papers: Recipe) -> None:
    ref = {
        "file": "8d8ad5b5-5a55-4c3c-9a57-3a0e8e8b0c1e",
        "name": "x.pdf",
        "media_type": "application/pdf",
        "size": 1,
        "pages": 1,
        "image_count": 0,
    }

    answer = client.post(RUNS, {"inputs": {"doc": ref}}, format="json")

    assert answer.status_code == 400
    assert answer.json()["errors"] == [
        "inputs.doc: upload a file (multipart/form-data, or {name, content_base64, "
        "media_type} in JSON)"
    ]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"name": "a.txt", "content_base64": "not base64!"}, "not valid base64"),
        ({"name": "a.txt", "content_base64": 12}, "must be strings"),
        ({"name": "a.txt", "content_base64": "", "extra": 1}, "unknown field extra"),
    ],
)
def test_bad_base64_is_a_400_naming_the_input(client: APIClient, value: Any, said: str) -> None:
    answer = client.post(RUNS, {"inputs": {"doc": value}}, format="json")

    assert answer.status_code == 400
    (error,) = answer.json()["errors"]
    assert error.startswith("inputs.doc: ") and said in error


def test_a_files_input_refuses_more_than_max_files(client: APIClient) -> None:
    extras = [upload(f"{i}.txt", b"x") for i in range(3)]

    answer = client.post(RUNS, {"doc": upload("a.txt", b"a"), "extras": extras}, format="multipart")

    assert answer.status_code == 400
    assert answer.json()["errors"] == ["inputs.extras: takes at most 2 files; 3 given"]
    assert not RunFile.objects.exists()


def test_uploads_beyond_the_users_rate_are_a_429(client: APIClient) -> None:
    with override_settings(RUN_FILE_UPLOADS_PER_MINUTE=2):
        first = client.post(RUNS, {"doc": upload("a.txt", b"a")}, format="multipart")
        second = client.post(RUNS, {"doc": upload("b.txt", b"b")}, format="multipart")
        third = client.post(RUNS, {"doc": upload("c.txt", b"c")}, format="multipart")

    assert (first.status_code, second.status_code) == (201, 201)
    assert third.status_code == 429
    assert 1 <= int(third["Retry-After"]) <= 60
    assert "at most 2 files may be uploaded a minute" in third.json()["errors"][0]
    assert Run.objects.count() == 2


def test_a_runs_file_downloads_as_an_attachment_to_those_who_see_the_run(
    client: APIClient, owner: Any
) -> None:
    answer = client.post(
        RUNS, {"doc": upload("page.txt", b"<script>x</script>")}, format="multipart"
    )
    run_id = answer.json()["id"]
    file_id = answer.json()["files"][0]["id"]
    url = f"/api/runs/{run_id}/files/{file_id}"

    got = client.get(url)

    assert got.status_code == 200
    assert b"".join(got.streaming_content) == b"<script>x</script>"
    assert got["Content-Type"] == "application/octet-stream"
    assert got["Content-Disposition"] == 'attachment; filename="page.txt"'
    assert got["X-Content-Type-Options"] == "nosniff"
    other = api_client(UserFactory(username="mallory"))
    assert other.get(url).status_code == 404
    assert api_client().get(url).status_code in (401, 403)
    assert (
        client.get(f"/api/runs/{run_id}/files/8d8ad5b5-5a55-4c3c-9a57-3a0e8e8b0c1e").status_code
        == 404
    )


def test_a_pdf_downloads_as_a_pdf(client: APIClient) -> None:
    answer = client.post(RUNS, {"doc": upload("r.pdf", documents.pdf(["x"]))}, format="multipart")
    run_id, file_id = answer.json()["id"], answer.json()["files"][0]["id"]

    got = client.get(f"/api/runs/{run_id}/files/{file_id}")

    assert got["Content-Type"] == "application/pdf"


def test_deleting_a_run_deletes_its_files_blobs(
    owner: Any, papers: Recipe, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(
            user=owner, recipe=papers, inputs={"doc": Upload("a.txt", b"alpha", "text/plain")}
        )
    stored = RunFile.objects.get(run=run)
    path = Path(stored.blob.path)
    assert path.exists()

    with django_capture_on_commit_callbacks(execute=True):
        run.delete()

    assert not path.exists() and not RunFile.objects.exists()


def test_a_fork_owns_copies_of_its_parents_files(
    owner: Any, papers: Recipe, django_capture_on_commit_callbacks: Any
) -> None:
    from runner import reruns
    from runner.advance import advance

    pdf = documents.pdf(["Only page"])
    with django_capture_on_commit_callbacks(execute=False):
        parent = services.run_start(
            user=owner, recipe=papers, inputs={"doc": Upload("a.pdf", pdf, "application/pdf")}
        )
    advance(parent.pk, time_slice=60)
    original = RunFile.objects.get(run=parent)

    with django_capture_on_commit_callbacks(execute=False):
        fork = reruns.run_fork(user=owner, run=parent, at_seq=1)

    copy = RunFile.objects.get(run=fork)
    assert copy.pk != original.pk and copy.blob.name != original.blob.name
    assert copy.blob.read() == pdf and copy.pages == original.pages == ["Only page"]
    assert fork.inputs["doc"] == {**parent.inputs["doc"], "file": str(copy.pk)}
    with django_capture_on_commit_callbacks(execute=True):
        parent.delete()
    assert Path(copy.blob.path).exists() and not Path(original.blob.path).exists()


def test_a_fork_may_be_given_another_file(owner: Any, papers: Recipe) -> None:
    from runner import reruns
    from runner.advance import advance

    parent = services.run_start(
        user=owner, recipe=papers, inputs={"doc": Upload("a.txt", b"first", "text/plain")}
    )
    advance(parent.pk, time_slice=60)
    other = {"name": "b.txt", "content_base64": b64(b"second")}

    fork = reruns.run_fork(user=owner, run=parent, at_seq=1, inputs={"doc": other})

    assert RunFile.objects.get(run=fork).text == "second"
    assert fork.inputs["doc"]["name"] == "b.txt"


def test_the_cli_uploads_a_file_given_with_at(owner: Any, papers: Recipe, tmp_path: Path) -> None:
    from django.core.management import call_command

    report = tmp_path / "report.pdf"
    report.write_bytes(documents.pdf(["One", "Two"]))
    one, two = tmp_path / "one.txt", tmp_path / "two.txt"
    one.write_text("uno")
    two.write_text("dos")
    out = io.StringIO()

    call_command(
        "run_recipe",
        "papers",
        "--input",
        f"doc=@{report}",
        "--input",
        f"extras=@{one}",
        "--input",
        f"extras=@{two}",
        "--input",
        "count=4",
        stdout=out,
    )

    run = Run.objects.get()
    assert "queued" in out.getvalue()
    assert run.inputs["doc"]["pages"] == 2 and run.inputs["count"] == 4
    assert [ref["name"] for ref in run.inputs["extras"]] == ["one.txt", "two.txt"]
    assert RunFile.objects.filter(run=run).count() == 3


def test_the_cli_names_a_missing_file_and_a_value_without_at(
    owner: Any, papers: Recipe, tmp_path: Path
) -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=r"--input doc: no file .*missing\.pdf"):
        call_command("run_recipe", "papers", "--input", f"doc=@{tmp_path / 'missing.pdf'}")
    with pytest.raises(CommandError, match=r"--input doc: a file input takes @PATH"):
        call_command("run_recipe", "papers", "--input", "doc=report.pdf")
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"PK\x03\x04 not a pdf")
    with pytest.raises(CommandError, match=r"inputs\.doc: bad\.pdf: the file is named \.pdf"):
        call_command("run_recipe", "papers", "--input", f"doc=@{bad}")
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_a_batch_takes_files_in_base64_all_or_none(client: APIClient) -> None:
    good = {"inputs": {"doc": {"name": "a.txt", "content_base64": b64(b"alpha")}}}
    bad = {"inputs": {"doc": {"name": "b.pdf", "content_base64": b64(b"not a pdf")}}}

    refused = client.post(f"{RUNS}/batch", {"runs": [good, bad]}, format="json")
    started = client.post(f"{RUNS}/batch", {"runs": [good, good]}, format="json")

    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        "runs[1].inputs.doc: b.pdf: the file is named .pdf but is not a PDF"
    ]
    assert started.status_code == 201
    assert RunFile.objects.count() == 2 and Run.objects.count() == 2


def test_a_repeated_upload_with_its_key_is_answered_once(client: APIClient) -> None:
    first = client.post(
        RUNS, {"doc": upload("a.txt", b"alpha")}, format="multipart", HTTP_IDEMPOTENCY_KEY="k1"
    )
    again = client.post(
        RUNS, {"doc": upload("a.txt", b"alpha")}, format="multipart", HTTP_IDEMPOTENCY_KEY="k1"
    )
    other = client.post(
        RUNS, {"doc": upload("a.txt", b"other")}, format="multipart", HTTP_IDEMPOTENCY_KEY="k1"
    )

    assert (first.status_code, again.status_code) == (201, 201)
    assert again["Idempotent-Replayed"] == "true" and again.json()["id"] == first.json()["id"]
    assert other.status_code == 422  # another file under the same key
    assert RunFile.objects.count() == 1


@pytest.mark.parametrize(
    ("inputs", "said"),
    [
        ("{not json", "inputs: must be JSON"),
        ('{"note": "a\\u0000b"}', "inputs.note: contains a NUL character"),
        ("[1, 2]", "inputs: must be a JSON object of name: value"),
    ],
)
def test_a_multipart_inputs_field_that_is_not_a_json_object_is_a_400(
    client: APIClient, inputs: str, said: str
) -> None:
    answer = client.post(RUNS, {"doc": upload("a.txt", b"a"), "inputs": inputs}, format="multipart")

    assert answer.status_code == 400
    assert said in " ".join(answer.json()["errors"]), answer.json()
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_a_start_that_fails_after_its_files_were_written_leaves_no_blob(
    owner: Any, papers: Recipe, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner import dispatch

    def broken(run_id: int) -> None:
        raise RuntimeError("the broker went away")

    monkeypatch.setattr(dispatch, "send_on_commit", broken)
    before = blobs()

    with pytest.raises(RuntimeError):
        services.run_start(
            user=owner, recipe=papers, inputs={"doc": Upload("a.txt", b"alpha", "text/plain")}
        )

    assert blobs() == before
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_line_wrapped_base64_is_taken(client: APIClient) -> None:
    data = documents.pdf(["Wrapped"])
    encoded = b64(data)
    # What `base64 file.pdf` writes: 76 columns, a newline after each line.
    wrapped = "".join(encoded[i : i + 76] + "\n" for i in range(0, len(encoded), 76))
    body = {"inputs": {"doc": {"name": "w.pdf", "content_base64": wrapped}}}

    answer = client.post(RUNS, body, format="json")

    assert answer.status_code == 201, answer.content
    assert RunFile.objects.get().pages == ["Wrapped"]


def test_base64_with_other_characters_than_whitespace_is_refused(client: APIClient) -> None:
    body = {"inputs": {"doc": {"name": "a.txt", "content_base64": b64(b"hello") + "\n*"}}}

    answer = client.post(RUNS, body, format="json")

    assert answer.status_code == 400
    assert answer.json()["errors"] == ["inputs.doc: content_base64 is not valid base64"]


def test_a_pdf_of_too_many_pages_is_a_400_naming_the_input(client: APIClient) -> None:
    with override_settings(RUN_FILE_MAX_PAGES=3):
        answer = post_multipart(client, RUNS, {"doc": ("long.pdf", documents.pdf(["a"] * 4))})

    assert answer.status_code == 400
    assert answer.json()["errors"] == [
        "inputs.doc: long.pdf: the PDF has 4 pages, more than the 3 a run's file may have"
    ]
    assert not Run.objects.exists() and not RunFile.objects.exists()


def test_a_multipart_request_is_read_no_further_than_its_files_bound(client: APIClient) -> None:
    before = blobs()
    with override_settings(RUN_UPLOAD_MAX_BYTES=1_000):
        answer = client.post(
            RUNS,
            {"doc": upload("a.txt", b"a" * 600), "extras": [upload("b.txt", b"b" * 600)]},
            format="multipart",
        )

    assert answer.status_code == 413
    assert answer.json()["errors"] == [
        "inputs: the files of one request are at most 1,000 bytes together "
        "(RUN_UPLOAD_MAX_BYTES); send fewer or smaller files"
    ]
    assert not Run.objects.exists() and blobs() == before


def test_a_multipart_request_longer_than_it_may_be_is_refused_unread(client: APIClient) -> None:
    with override_settings(RUN_UPLOAD_MAX_BYTES=1_000, DATA_UPLOAD_MAX_MEMORY_SIZE=100):
        answer = client.post(RUNS, {"doc": upload("a.txt", b"a" * 1_200)}, format="multipart")

    assert answer.status_code == 413
    assert "at most 1,000 bytes together" in answer.json()["errors"][0]


def test_uploads_are_counted_as_they_arrive_even_in_a_request_refused_after(
    client: APIClient,
) -> None:
    with override_settings(RUN_FILE_UPLOADS_PER_MINUTE=3):
        refused = client.post(
            RUNS,
            {"doc": upload("a.txt", b"a"), "extras": [upload("b.txt", b"b")], "inputs": "{"},
            format="multipart",
        )
        once = client.post(RUNS, {"doc": upload("c.txt", b"c")}, format="multipart")
        over = client.post(RUNS, {"doc": upload("d.txt", b"d")}, format="multipart")

    assert refused.status_code == 400  # its inputs field is not JSON: but its files came
    assert once.status_code == 201  # counted once, as it was read, not again by run_start
    assert over.status_code == 429
    assert 1 <= int(over["Retry-After"]) <= 60
    assert "at most 3 files may be uploaded a minute" in over.json()["errors"][0]


def test_each_file_is_kept_to_a_byte_over_what_its_input_takes() -> None:
    from django.core.files.uploadhandler import MemoryFileUploadHandler

    from runner.multipart import parse_run_upload

    boundary = "b0undary"
    body = b""
    for field, name, size in [("doc", "a.txt", 50), ("doc", "b.txt", 5), ("other", "c.txt", 30)]:
        body += (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
                f'filename="{name}"\r\n\r\n'
            ).encode()
            + b"x" * size
            + b"\r\n"
        )
    body += f"--{boundary}--\r\n".encode()
    meta = {
        "CONTENT_TYPE": f"multipart/form-data; boundary={boundary}",
        "CONTENT_LENGTH": str(len(body)),
    }

    _, files, refused = parse_run_upload(
        meta,
        io.BytesIO(body),
        [MemoryFileUploadHandler()],
        "utf-8",
        user=None,
        bounds={"doc": (10, 1)},
    )

    assert refused is None
    # 11 bytes: enough to refuse it as over 10; the second of a one-file input is not kept.
    assert [f.size for f in files.getlist("doc")] == [11, 0]
    assert files["other"].size == 30  # no input's bounds: RUN_FILE_MAX_BYTES
    assert [f.client_name for f in files.getlist("doc")] == ["a.txt", "b.txt"]


def test_a_fork_onto_a_version_that_makes_an_input_a_file_takes_no_ref_made_by_hand(
    owner: Any, papers: Recipe
) -> None:
    from runner import reruns
    from runner.advance import advance
    from workflows.services import recipe_update

    other = services.run_start(
        user=owner, recipe=papers, inputs={"doc": Upload("a.txt", b"theirs", "text/plain")}
    )
    theirs = RunFile.objects.get(run=other)
    # Version 2 takes the ref-shaped object the run was given; version 3 makes it a file input.
    shaped = {**other.inputs["doc"], "file": str(theirs.pk)}
    document = papers_document()
    document["inputs"]["doc"] = {"type": "object", "required": True}
    recipe_update(recipe=papers, document=document)
    recipe_publish(recipe=papers, user=owner)
    parent = services.run_start(user=owner, recipe=papers, inputs={"doc": shaped})
    advance(parent.pk, time_slice=60)
    recipe_update(recipe=papers, document=papers_document())
    recipe_publish(recipe=papers, user=owner)

    with pytest.raises(reruns.RerunInvalid) as caught:
        reruns.run_fork(user=owner, run=parent, at_seq=1, version=3)
    assert "inputs.doc: not a file given to this run; upload one" in caught.value.errors
    with pytest.raises(reruns.RerunInvalid) as resumed:
        reruns.run_resume(run=parent, version=3)
    assert "inputs.doc: not a file given to this run; upload one" in str(resumed.value)
    assert RunFile.objects.count() == 1
