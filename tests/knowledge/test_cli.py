"""`manage.py knowledge_upload` and `manage.py knowledge_search` from the terminal."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from knowledge import ingest
from knowledge.models import Document, KnowledgeBase
from tests.knowledge import files
from tests.knowledge.conftest import add


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "guide.md").write_bytes(files.MARKDOWN)
    (tmp_path / "ferry.docx").write_bytes(files.word())
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 and then nothing")
    return tmp_path


def upload(*args: str) -> str:
    out = StringIO()
    call_command("knowledge_upload", *args, stdout=out)
    return out.getvalue()


def test_it_creates_the_base_adds_files_and_says_which_failed(
    folder: Path, user: Any, settings: Any
) -> None:
    settings.EMBEDDED_WORKER = True  # no Redis: the files are ingested by the command
    out = StringIO()

    with pytest.raises(CommandError, match="1 of 3 file"):
        call_command(
            "knowledge_upload",
            "harbour",
            str(folder / "guide.md"),
            str(folder / "broken.pdf"),
            str(folder / "ferry.docx"),
            "--create",
            "--user",
            "alice",
            stdout=out,
        )

    printed = out.getvalue()
    base = KnowledgeBase.objects.get(slug="harbour")
    guide, ferry = base.documents.order_by("pk")
    assert "created knowledge base 'harbour' (owner alice)" in printed
    assert f"added: {folder / 'guide.md'} (document {guide.pk}, markdown)" in printed
    assert f"error: {folder / 'broken.pdf'}: the PDF cannot be read" in printed
    assert "no REDIS_URL: ingesting here" in printed
    assert f"ready: {folder / 'guide.md'} (2 chunks) 100%" in printed
    assert f"ready: {folder / 'ferry.docx'} (" in printed
    assert (base.owner.username, guide.status, ferry.status) == ("alice", "ready", "ready")


def test_a_file_already_there_is_said_so(folder: Path, base: KnowledgeBase, settings: Any) -> None:
    document = add(base, "guide.md", files.MARKDOWN)

    printed = upload("harbour", str(folder / "guide.md"))

    assert printed == f"already there: {folder / 'guide.md'} (document {document.pk})\n"
    assert base.documents.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere", "guide.md"], r"no knowledge base 'nowhere' \(--create makes it\)"),
        (["harbour", "guide.md", "--user", "nobody"], "no user 'nobody'"),
        (["Not A Slug", "guide.md", "--create", "--user", "alice"], "cannot create it: slug: "),
        (["harbour", "missing.txt"], "1 of 1 file"),
    ],
)
def test_it_explains_what_is_wrong(
    folder: Path, base: KnowledgeBase, args: list[str], message: str, monkeypatch: Any
) -> None:
    monkeypatch.chdir(folder)

    with pytest.raises(CommandError, match=message):
        upload(*args)

    assert not Document.objects.exists()


def test_an_uploader_must_be_allowed_to_change_the_base(
    folder: Path, base: KnowledgeBase, other_user: Any
) -> None:
    with pytest.raises(CommandError, match=r"user '\w+' may not add files to knowledge base"):
        upload("harbour", str(folder / "guide.md"), "--user", other_user.username)
    assert not Document.objects.exists()

    base.shared_with_users.add(other_user)
    assert "added: " in upload("harbour", str(folder / "guide.md"), "--user", other_user.username)


def test_creating_a_base_needs_an_owner(folder: Path, db: None) -> None:
    with pytest.raises(CommandError, match="no superuser to own the knowledge base"):
        upload("harbour", str(folder / "guide.md"), "--create")


@pytest.fixture
def worker(celery_worker: Any, transactional_db: None) -> Any:
    return celery_worker


def test_wait_follows_the_workers_progress(folder: Path, worker: Any, user: Any) -> None:
    long = folder / "long.md"
    long.write_text("\n\n".join(f"# Part {i}\n\n" + "tide words " * 40 for i in range(8)))

    printed = upload("harbour", str(long), "--create", "--user", "alice", "--wait")

    document = Document.objects.get()
    assert document.status == Document.Status.READY
    assert f"added: {long} (document {document.pk}, markdown)" in printed
    assert printed.rstrip().endswith(f"ready: {long} ({document.chunks_total} chunks) 100%")
    assert "no REDIS_URL" not in printed


# Search -----------------------------------------------------------------------------------------


def search(*args: str) -> str:
    out = StringIO()
    call_command("knowledge_search", *args, stdout=out)
    return out.getvalue()


def test_it_prints_the_hits_best_first(base: KnowledgeBase) -> None:
    for name, data in [
        ("guide.md", files.MARKDOWN),
        ("notes.txt", b"Boats moor at the east quay."),
        ("ferry.docx", files.word()),
    ]:
        ingest.ingest_document(add(base, name, data).pk)

    printed = search("harbour", "storm lamp", "--mode", "fulltext", "--top-k", "1")

    first, text = printed.splitlines()
    assert first.startswith("[1] 0.")
    assert first.endswith(" Lighthouse Guide › Storms")
    assert text == "    During a storm the lamp burns all night and the keeper logs the wind."


def test_it_says_when_nothing_is_found(base: KnowledgeBase) -> None:
    ingest.ingest_document(add(base, "guide.md", files.MARKDOWN).pk)

    assert search("harbour", "volcano", "--mode", "fulltext") == "no hits\n"


def test_it_searches_as_a_user_who_may_read_the_base(base: KnowledgeBase, other_user: Any) -> None:
    ingest.ingest_document(add(base, "guide.md", files.MARKDOWN).pk)
    name = other_user.username

    with pytest.raises(CommandError, match=f"no knowledge base 'harbour' that user '{name}' may"):
        search("harbour", "storm", "--mode", "fulltext", "--user", name)
    base.shared_with_users.add(other_user)

    assert search("harbour", "storm", "--mode", "fulltext", "--user", name).startswith("[1] ")
    with pytest.raises(CommandError, match="no user 'nobody'"):
        search("harbour", "storm", "--user", "nobody")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere", "x"], "no knowledge base 'nowhere'"),
        (["harbour", "storm", "--mode", "semantic"], "embedding actor"),
        (["harbour", "   "], "the query is empty"),
        (["harbour", "x", "--top-k", "0"], "--top-k is from 1 to 50"),
        (["harbour", "x", "--min-score", "1.5"], "--min-score is from 0 to 1"),
    ],
)
def test_a_search_that_cannot_run_says_why(
    base: KnowledgeBase, args: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        search(*args)
