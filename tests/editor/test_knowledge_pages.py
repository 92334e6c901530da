"""The knowledge pages: bases, uploads with their progress, documents, chunks, search; the step
panel's Sources section and its Try; citations in the run monitor."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from knowledge.ingest import add_document, create_base, ingest_document
from knowledge.models import Document, KnowledgeBase
from runner.advance import advance
from runner.models import Run
from runner.services import run_start
from tests.factories import ActorFactory, UserFactory
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish

from .conftest import draft, htmx_post, live_answer

pytestmark = pytest.mark.django_db

GUIDE = b"""# Lighthouse guide

## Lamps

The lamp of a lighthouse turns once every ten seconds. Keepers trim the wick at dusk.

## Storms

In a storm the keeper rings the fog bell and logs every passing ship.
"""
HOSTILE = b"""# <script>alert('heading')</script>

The <b>bold</b> keeper wrote <script>alert('text')</script> in the log about owls.
"""


@pytest.fixture
def base(author: Any) -> KnowledgeBase:
    return create_base(owner=author, slug="lighthouse", name="Lighthouse")


@pytest.fixture
def other_base(stranger: Any) -> KnowledgeBase:
    return create_base(owner=stranger, slug="eves-notes", name="Eve's notes")


def upload(client: Client, slug: str, *files: tuple[str, bytes], **extra: Any) -> Any:
    data = [SimpleUploadedFile(name, content) for name, content in files]
    return client.post(
        reverse("knowledge-upload", args=[slug]), {"files": data}, HTTP_HX_REQUEST="true", **extra
    )


def indexed(base: KnowledgeBase, name: str, content: bytes, user: Any) -> Document:
    """Upload through the page's service and index it here, as the worker would."""
    document, _ = add_document(base, user, name, content)
    ingest_document(document.pk)
    document.refresh_from_db()
    return document


def html(response: Any) -> str:
    return response.content.decode()


# -- who may see what ------------------------------------------------------------------------

PAGES = [
    ("get", "/knowledge/"),
    ("get", "/knowledge/lighthouse/"),
    ("get", "/knowledge/lighthouse/documents/"),
    ("get", "/knowledge/lighthouse/documents/1/"),
    ("get", "/knowledge/lighthouse/search/?q=lamp"),
    ("post", "/knowledge/lighthouse/upload/"),
    ("post", "/knowledge/lighthouse/settings/"),
    ("post", "/knowledge/lighthouse/delete/"),
    ("post", "/knowledge/lighthouse/documents/1/delete/"),
    ("post", "/recipes/story/panels/sources/try/"),
]


@pytest.mark.parametrize(("method", "url"), PAGES)
def test_every_page_needs_a_login(base: KnowledgeBase, method: str, url: str) -> None:
    response = getattr(Client(), method)(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


@pytest.mark.parametrize(("method", "url"), PAGES[1:-1])
def test_another_users_base_does_not_exist_for_you(
    base: KnowledgeBase, stranger_web: Client, method: str, url: str
) -> None:
    document = indexed(base, "guide.md", GUIDE, base.owner)
    url = url.replace("/1/", f"/{document.pk}/")

    response = getattr(stranger_web, method)(url)

    assert response.status_code == 404
    assert KnowledgeBase.objects.filter(slug="lighthouse").exists()
    assert Document.objects.filter(pk=document.pk).exists()


def test_the_list_shows_your_bases_and_those_shared_with_you_only(
    base: KnowledgeBase, other_base: KnowledgeBase, web: Client, author: Any
) -> None:
    shared = create_base(owner=UserFactory(username="bob"), slug="bobs", name="Bob's shared")
    shared.shared_with_users.add(author)
    indexed(base, "guide.md", GUIDE, author)

    page = html(web.get("/knowledge/"))

    assert "Lighthouse" in page and "Bob&#x27;s shared" in page
    assert "Eve" not in page
    row = page[page.index("/knowledge/lighthouse/") :]
    assert "<td>1</td>" in row  # one document
    assert "none (full text only)" in row


def test_the_list_says_how_many_documents_are_being_indexed(
    base: KnowledgeBase, web: Client, author: Any
) -> None:
    indexed(base, "guide.md", GUIDE, author)
    add_document(base, author, "notes.txt", b"Queued, not indexed yet.")
    add_document(base, author, "more.txt", b"Queued too.")

    page = html(web.get("/knowledge/"))

    row = page[page.index("/knowledge/lighthouse/") :]
    assert '<td>3 <span class="badge running">2 indexing</span></td>' in row


def test_a_user_it_is_shared_with_may_upload_but_not_delete_it(
    base: KnowledgeBase, stranger: Any, stranger_web: Client
) -> None:
    base.shared_with_users.add(stranger)

    added = upload(stranger_web, "lighthouse", ("guide.md", GUIDE))
    page = html(stranger_web.get("/knowledge/lighthouse/"))
    refused = stranger_web.post("/knowledge/lighthouse/delete/")

    assert added.status_code == 200
    assert base.documents.count() == 1
    assert "Delete knowledge base" not in page
    assert refused.status_code == 403
    assert KnowledgeBase.objects.filter(pk=base.pk).exists()


# -- creating and changing a base ------------------------------------------------------------


def test_it_creates_a_base_with_a_slug_from_its_name(web: Client, author: Any) -> None:
    actor = ActorFactory(name="embedder")

    response = web.post(
        "/knowledge/",
        {"name": "Field Notes", "slug": "", "description": "", "embedding_actor": actor.pk},
    )

    base = KnowledgeBase.objects.get()
    assert response.status_code == 302
    assert response["Location"] == "/knowledge/field-notes/"
    assert (base.slug, base.owner, base.embedding_actor) == ("field-notes", author, actor)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": ""}, "name", "This field is required."),
        ({"name": "x", "slug": "Bad Slug"}, "slug", "Use lowercase letters"),
        ({"name": "Lighthouse", "slug": "lighthouse"}, "slug", "exists already"),
        ({"name": "x", "embedding_actor": "999999"}, "embedding_actor", "Select a valid choice"),
    ],
)
def test_it_refuses_a_base_it_cannot_create_and_says_why(
    base: KnowledgeBase, web: Client, fields: dict[str, str], field: str, message: str
) -> None:
    response = web.post("/knowledge/", fields)

    assert response.status_code == 400
    assert message in " ".join(response.context["form"].errors[field])
    assert KnowledgeBase.objects.count() == 1


def test_saving_new_chunking_reindexes_every_document_and_says_so(
    base: KnowledgeBase, web: Client, author: Any
) -> None:
    document = indexed(base, "guide.md", GUIDE, author)
    assert document.status == Document.Status.READY

    response = web.post(
        "/knowledge/lighthouse/settings/",
        {"name": "Lighthouse", "description": "", "chunk_size": 200, "chunk_overlap": 20},
        HTTP_HX_REQUEST="true",
    )

    page = html(response)
    document.refresh_from_db()
    base.refresh_from_db()
    assert response.status_code == 200
    assert "re-indexed" in page
    assert (base.chunk_size, base.chunk_overlap) == (200, 20)
    assert document.status == Document.Status.QUEUED
    # The documents table comes along (out of band), polling again.
    assert 'hx-swap-oob="true"' in page and 'hx-trigger="every 1s"' in page


def test_renaming_alone_does_not_reindex(base: KnowledgeBase, web: Client, author: Any) -> None:
    document = indexed(base, "guide.md", GUIDE, author)

    response = web.post(
        "/knowledge/lighthouse/settings/",
        {"name": "Light", "description": "d", "chunk_size": 1000, "chunk_overlap": 150},
        HTTP_HX_REQUEST="true",
    )

    document.refresh_from_db()
    assert "Saved." in html(response) and "re-indexed with" not in html(response)
    assert document.status == Document.Status.READY
    assert KnowledgeBase.objects.get().name == "Light"


@pytest.mark.parametrize(
    ("size", "overlap", "field", "message"),
    [
        (50, 0, "chunk_size", "greater than or equal to 100"),
        (400, 300, "chunk_overlap", "At most half the chunk size (200 characters)."),
        (400, -1, "chunk_overlap", "greater than or equal to 0"),
    ],
)
def test_it_refuses_settings_it_cannot_use(
    base: KnowledgeBase, web: Client, size: int, overlap: int, field: str, message: str
) -> None:
    response = web.post(
        "/knowledge/lighthouse/settings/",
        {"name": "Lighthouse", "chunk_size": size, "chunk_overlap": overlap},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200  # htmx swaps only 2xx answers
    assert message in " ".join(response.context["settings_form"].errors[field])
    assert KnowledgeBase.objects.get().chunk_size == 1000


def test_the_owner_deletes_a_base(base: KnowledgeBase, web: Client, author: Any) -> None:
    indexed(base, "guide.md", GUIDE, author)

    response = web.post("/knowledge/lighthouse/delete/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert response["HX-Redirect"] == "/knowledge/"
    assert not KnowledgeBase.objects.exists() and not Document.objects.exists()


# -- uploads and their progress --------------------------------------------------------------


def test_an_upload_is_added_queued_and_the_table_polls_until_it_is_ready(
    base: KnowledgeBase, web: Client
) -> None:
    response = upload(web, "lighthouse", ("guide.md", GUIDE), ("notes.txt", b"Owls at night."))

    page = html(response)
    assert response.status_code == 200
    assert "guide.md</strong>:\n      added" in page and "notes.txt</strong>:\n      added" in page
    documents = list(base.documents.order_by("title"))
    assert [d.status for d in documents] == ["queued", "queued"]
    assert 'id="documents" hx-get="/knowledge/lighthouse/documents/"' in page
    assert 'hx-trigger="every 1s"' in page

    for document in documents:
        ingest_document(document.pk)
    table = html(web.get("/knowledge/lighthouse/documents/", HTTP_HX_REQUEST="true"))

    assert "hx-trigger" not in table  # every document is ready: the polling stops
    assert table.count('value="100"') == 2
    assert table.count(">Ready</span>") == 2


def test_the_progress_bar_shows_how_far_indexing_is(base: KnowledgeBase, web: Client) -> None:
    upload(web, "lighthouse", ("guide.md", GUIDE))
    Document.objects.update(status="ingesting", chunks_total=8, chunks_done=3)

    table = html(web.get("/knowledge/lighthouse/documents/"))

    assert '<progress max="100" value="37"' in table
    assert ">Ingesting</span>" in table and "3 / 8" in table
    assert 'hx-trigger="every 1s"' in table


def test_a_document_that_failed_shows_its_error_escaped(base: KnowledgeBase, web: Client) -> None:
    upload(web, "lighthouse", ("guide.md", GUIDE))
    Document.objects.update(status="failed", error="embedding server <b>down</b>")

    table = html(web.get("/knowledge/lighthouse/documents/"))

    assert "embedding server &lt;b&gt;down&lt;/b&gt;" in table
    assert ">Failed</span>" in table
    assert "hx-trigger" not in table


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.md", b"", "is empty"),
        ("archive.zip", b"PK\x03\x04" + b"\x00" * 40, "zip archive"),
        ("report.doc", b"\xd0\xcf\x11\xe0 old word", "Word 97-2003"),
        ("broken.pdf", b"%PDF-1.4 nothing else", "the PDF cannot be read"),
    ],
)
def test_a_file_it_cannot_read_is_refused_with_the_reason_and_nothing_is_stored(
    base: KnowledgeBase, web: Client, name: str, content: bytes, message: str
) -> None:
    response = upload(web, "lighthouse", (name, content), ("guide.md", GUIDE))

    page = html(response)
    assert response.status_code == 200
    assert f"{name}</strong>:\n      not added: " in page
    assert message in page
    assert list(base.documents.values_list("filename", flat=True)) == ["guide.md"]


def test_a_file_over_the_limit_is_refused_before_it_is_read(
    base: KnowledgeBase, web: Client, settings: Any
) -> None:
    settings.KNOWLEDGE_MAX_UPLOAD_BYTES = 100

    page = html(upload(web, "lighthouse", ("big.md", b"a" * 101)))

    assert "the limit is 100 bytes" in page
    assert not base.documents.exists()


def test_the_same_file_twice_is_stored_once(base: KnowledgeBase, web: Client) -> None:
    upload(web, "lighthouse", ("guide.md", GUIDE))

    page = html(upload(web, "lighthouse", ("copy.md", GUIDE)))

    assert "already in this knowledge base as “Lighthouse guide”" in page
    assert base.documents.count() == 1


def test_an_upload_without_files_says_so(base: KnowledgeBase, web: Client) -> None:
    response = web.post("/knowledge/lighthouse/upload/", {}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert "This field is required." in html(response)


def test_deleting_a_document_answers_with_the_table(
    base: KnowledgeBase, web: Client, author: Any
) -> None:
    document = indexed(base, "guide.md", GUIDE, author)

    response = web.post(f"/knowledge/lighthouse/documents/{document.pk}/delete/")

    assert "Deleted “Lighthouse guide”" in html(response)
    assert not base.documents.exists() and not base.chunks.exists()


def test_a_document_of_another_base_is_not_found_under_yours(
    base: KnowledgeBase, other_base: KnowledgeBase, web: Client, stranger: Any
) -> None:
    theirs = indexed(other_base, "guide.md", GUIDE, stranger)

    assert web.get(f"/knowledge/lighthouse/documents/{theirs.pk}/").status_code == 404
    deleted = web.post(f"/knowledge/lighthouse/documents/{theirs.pk}/delete/")
    assert deleted.status_code == 404
    assert Document.objects.filter(pk=theirs.pk).exists()


def test_a_documents_chunks_are_shown_with_their_headings_escaped(
    base: KnowledgeBase, web: Client, author: Any
) -> None:
    document = indexed(base, "hostile.md", HOSTILE, author)

    page = html(web.get(f"/knowledge/lighthouse/documents/{document.pk}/"))

    assert "<script>" not in page.split("</header>", 1)[1]
    assert "&lt;script&gt;alert(&#x27;text&#x27;)&lt;/script&gt;" in page
    assert document.chunks.count() >= 1


# -- search ----------------------------------------------------------------------------------


def test_search_shows_hits_with_scores_and_headings(
    base: KnowledgeBase, web: Client, author: Any
) -> None:
    indexed(base, "guide.md", GUIDE, author)

    response = web.get(
        "/knowledge/lighthouse/search/", {"q": "fog bell", "mode": "fulltext", "top_k": 3}
    )

    page = html(response)
    hits = response.context["hits"]
    assert hits and "fog bell" in hits[0].text
    assert "Lighthouse guide › Storms" in hits[0].heading or "Storms" in hits[0].heading
    assert f"{hits[0].score:.3f}" in page
    assert '<strong class="hit-title">Lighthouse guide</strong>' in page


def test_search_results_are_escaped(base: KnowledgeBase, web: Client, author: Any) -> None:
    indexed(base, "hostile.md", HOSTILE, author)

    page = html(web.get("/knowledge/lighthouse/search/", {"q": "owls keeper", "mode": "fulltext"}))

    assert "<script>" not in page and "<b>" not in page
    assert "&lt;script&gt;" in page


def test_a_search_the_base_cannot_make_says_why(
    base: KnowledgeBase, web: Client, author: Any
) -> None:
    indexed(base, "guide.md", GUIDE, author)

    response = web.get("/knowledge/lighthouse/search/", {"q": "lamp", "mode": "semantic"})

    assert response.status_code == 200
    assert response.context["error"]
    assert 'class="error" role="alert"' in html(response)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"q": ""}, "This field is required."),
        ({"q": "lamp", "top_k": "0"}, "greater than or equal to 1"),
        ({"q": "lamp", "mode": "psychic"}, "Select a valid choice"),
    ],
)
def test_a_search_form_with_mistakes_shows_them(
    base: KnowledgeBase, web: Client, query: dict[str, str], message: str
) -> None:
    page = html(web.get("/knowledge/lighthouse/search/", query))

    assert message in page


def test_a_search_with_no_hits_says_so(base: KnowledgeBase, web: Client, author: Any) -> None:
    indexed(base, "guide.md", GUIDE, author)

    page = html(web.get("/knowledge/lighthouse/search/", {"q": "zebra", "mode": "fulltext"}))

    assert "No hits for “zebra”." in page


# -- the step panel's sources ----------------------------------------------------------------


def step_fields(**overrides: Any) -> dict[str, Any]:
    """The step form's fields for the story's first step, as the panel posts them."""
    fields = {
        "apply": "1",
        "element": "s-1",
        "step": 0,
        "key": "write",
        "name": "Write",
        "kind": "llm",
        "actor": "writer",
        "sequence": "1",
        "prompt": "Write a story about {topic}\n\n{sources}",
        "sources-TOTAL_FORMS": "0",
        "sources-INITIAL_FORMS": "0",
    }
    fields.update(overrides)
    return fields


def source_row(index: int, **values: Any) -> dict[str, Any]:
    row = {"knowledge_base": "", "query": "", "top_k": "5", "min_score": "0", "mode": "hybrid"}
    row.update(values)
    return {f"sources-{index}-{name}": value for name, value in row.items()}


def test_the_step_panel_offers_a_sources_section_for_the_kinds_that_search(
    story: Recipe, web: Client, base: KnowledgeBase, other_base: KnowledgeBase
) -> None:
    page = html(htmx_post(web, reverse("recipe-step-panel", args=["story"]), draft(story), step=0))

    assert 'data-kind-only="llm retrieve"' in page
    assert 'name="sources-TOTAL_FORMS" value="0"' in page
    assert "data-source-template" in page
    assert '<option value="lighthouse">Lighthouse (lighthouse)</option>' in page
    assert "eves-notes" not in page  # not readable by the author


def test_applying_a_step_writes_its_sources(
    story: Recipe, web: Client, base: KnowledgeBase
) -> None:
    fields = step_fields(**source_row(0, knowledge_base="lighthouse", query="{topic}", top_k="3"))
    fields["sources-TOTAL_FORMS"] = "1"

    response = htmx_post(web, reverse("recipe-step-panel", args=["story"]), draft(story), **fields)

    answer = live_answer(response)
    assert answer["errors"] == {}  # {sources} is a name every step may use
    assert answer["form_errors"] == []
    assert answer["result"]["step"]["sources"] == [
        {
            "knowledge_base": "lighthouse",
            "query": "{topic}",
            "top_k": 3,
            "min_score": 0.0,
            "mode": "hybrid",
        }
    ]


def test_the_panel_shows_a_steps_sources_and_removing_them_all_drops_the_field(
    story: Recipe, web: Client, base: KnowledgeBase
) -> None:
    document = draft(story)
    document["steps"][0]["sources"] = [{"knowledge_base": "lighthouse", "top_k": 7}]

    opened = html(htmx_post(web, reverse("recipe-step-panel", args=["story"]), document, step=0))
    applied = htmx_post(
        web, reverse("recipe-step-panel", args=["story"]), document, **step_fields()
    )

    assert 'name="sources-TOTAL_FORMS" value="1"' in opened
    assert 'name="sources-0-top_k" value="7"' in opened
    assert '<option value="lighthouse" selected>' in opened
    assert "sources" not in live_answer(applied)["result"]["step"]


def test_a_post_without_the_sources_rows_keeps_the_steps_sources(
    story: Recipe, web: Client, base: KnowledgeBase
) -> None:
    document = draft(story)
    document["steps"][0]["sources"] = [{"knowledge_base": "lighthouse"}]
    fields = step_fields()
    del fields["sources-TOTAL_FORMS"], fields["sources-INITIAL_FORMS"]

    response = htmx_post(web, reverse("recipe-step-panel", args=["story"]), document, **fields)

    assert live_answer(response)["result"]["step"]["sources"] == [{"knowledge_base": "lighthouse"}]


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"knowledge_base": ""}, "knowledge_base", "This field is required."),
        ({"knowledge_base": "eves-notes"}, "knowledge_base", "Select a valid choice"),
        ({"knowledge_base": "lighthouse", "top_k": "51"}, "top_k", "less than or equal to 50"),
        ({"knowledge_base": "lighthouse", "min_score": "2"}, "min_score", "less than or equal"),
        ({"knowledge_base": "lighthouse", "mode": "magic"}, "mode", "Select a valid choice"),
        ({"knowledge_base": "lighthouse", "query": "{steps.nope.response}"}, "query", "nope"),
    ],
)
def test_a_source_with_a_mistake_is_refused_on_its_row(
    story: Recipe,
    web: Client,
    base: KnowledgeBase,
    other_base: KnowledgeBase,
    row: dict[str, str],
    field: str,
    message: str,
) -> None:
    fields = step_fields(**source_row(0, **{"query": "lamps", **row}))
    fields["sources-TOTAL_FORMS"] = "1"
    fields["sources-INITIAL_FORMS"] = "1"

    response = htmx_post(web, reverse("recipe-step-panel", args=["story"]), draft(story), **fields)

    answer = live_answer(response)
    assert answer["result"] is None
    assert message in " ".join(answer["errors"][f"sources-0-{field}"])


def test_a_kind_that_does_not_search_drops_its_sources(
    story: Recipe, web: Client, base: KnowledgeBase
) -> None:
    document = draft(story)
    document["steps"][1]["sources"] = [{"knowledge_base": "lighthouse"}]
    fields = step_fields(
        step=1, key="review", name="Review", kind="human", actor="editors", sequence="2"
    )
    fields["prompt"] = "Is this good?"
    fields.update(source_row(0, knowledge_base="lighthouse"), **{"sources-TOTAL_FORMS": "1"})

    response = htmx_post(web, reverse("recipe-step-panel", args=["story"]), document, **fields)

    answer = live_answer(response)
    assert answer["errors"] == {}
    assert "sources" not in answer["result"]["step"]


def try_source(client: Client, row: dict[str, Any], *, slug: str = "story") -> Any:
    fields = {"try_source": "sources-1", **source_row(0, knowledge_base="wrong-row")}
    fields.update({f"sources-1-{k}": v for k, v in row.items()})
    return client.post(reverse("recipe-sources-try", args=[slug]), fields, HTTP_HX_REQUEST="true")


def test_try_runs_the_rows_query_and_shows_its_hits(
    story: Recipe, web: Client, base: KnowledgeBase, author: Any
) -> None:
    indexed(base, "guide.md", GUIDE, author)
    row = {"knowledge_base": "lighthouse", "query": "fog bell", "top_k": "2", "mode": "fulltext"}

    response = try_source(web, {**row, "min_score": "0"})

    page = html(response)
    assert response.status_code == 200
    assert len(response.context["hits"]) >= 1
    assert "fog bell" in response.context["hits"][0].text
    assert '<ol class="hits"' in page


def test_try_of_a_template_query_asks_for_a_sample_then_searches_it(
    story: Recipe, web: Client, base: KnowledgeBase, author: Any
) -> None:
    indexed(base, "guide.md", GUIDE, author)
    row = {"knowledge_base": "lighthouse", "query": "{topic}", "mode": "fulltext"}
    row.update(top_k="5", min_score="0")

    asked = html(try_source(web, row))
    answered = try_source(web, {**row, "sample": "wick at dusk"})

    assert "Type a sample query" in asked and "({topic})" in asked
    assert "wick" in answered.context["hits"][0].text


def test_try_says_why_it_cannot_search(
    story: Recipe, web: Client, base: KnowledgeBase, other_base: KnowledgeBase
) -> None:
    row = {"query": "lamp", "top_k": "5", "min_score": "0", "mode": "hybrid"}

    unreadable = html(try_source(web, {**row, "knowledge_base": "eves-notes"}))
    semantic = try_source(web, {**row, "knowledge_base": "lighthouse", "mode": "semantic"})

    assert "No knowledge base &#x27;eves-notes&#x27; that you may read." in unreadable
    assert semantic.context["error"]
    assert semantic.context["hits"] == []


def test_try_on_a_recipe_you_cannot_see_is_not_found(
    story: Recipe, stranger_web: Client, other_base: KnowledgeBase
) -> None:
    row = {"knowledge_base": "eves-notes", "query": "x", "top_k": "5", "min_score": "0"}

    assert try_source(stranger_web, {**row, "mode": "hybrid"}).status_code == 404


# -- citations in the run monitor ------------------------------------------------------------

CITED = {
    "format": "branchline.recipe/v1",
    "slug": "cited",
    "name": "Cited",
    "inputs": {"question": {"type": "string", "required": True}},
    "steps": [
        {
            "key": "find",
            "name": "Find",
            "kind": "retrieve",
            "sources": [{"knowledge_base": "lighthouse", "mode": "fulltext"}],
        }
    ],
}


def test_the_monitor_shows_a_steps_citations_numbered_and_escaped(
    author: Any, web: Client, base: KnowledgeBase
) -> None:
    indexed(base, "hostile.md", HOSTILE, author)
    indexed(base, "guide.md", GUIDE, author)
    recipe = recipe_import(user=author, data=json.dumps(CITED)).recipe
    recipe_publish(recipe=recipe, user=author)
    run = run_start(user=author, recipe=recipe, inputs={"question": "keeper owls fog"})
    advance(run.pk, time_slice=60)
    run = Run.objects.get(pk=run.pk)
    step = run.steps.get()

    page = html(web.get(f"/runs/{run.pk}/"))
    card = html(web.get(f"/runs/{run.pk}/steps/{step.seq}/"))

    hits = step.details["retrieval"]["hits"]
    assert run.status == "succeeded", run.error
    assert len(hits) >= 2
    for text in (page, card):
        assert 'class="citations"' in text
        assert '<span class="citation-number">[1]</span>' in text
        assert '<span class="citation-number">[2]</span>' in text
        assert "Searched <code>lighthouse</code> for “keeper owls fog”" in text
        assert "&lt;script&gt;alert(&#x27;text&#x27;)&lt;/script&gt;" in text
        assert "<script>alert(" not in text
    assert f"{hits[0]['score']:.3f}" in page


def test_a_prompt_may_name_the_sources(story: Recipe, web: Client, base: KnowledgeBase) -> None:
    document = draft(story)
    document["steps"][0]["sources"] = [{"knowledge_base": "lighthouse"}]
    url = reverse("recipe-step-panel", args=["story"])
    review = step_fields(step=1, key="review", name="Review", kind="human", actor="editors")
    review["sequence"] = "2"

    fine = live_answer(
        htmx_post(web, url, document, **{**review, "prompt": "{sources} {steps.write.sources}"})
    )
    wrong = live_answer(
        htmx_post(web, url, document, **{**review, "prompt": "{steps.nope.sources}"})
    )
    panel = html(htmx_post(web, url, document, step=1))

    assert fine["errors"] == {}
    assert "there is no step 'nope'" in " ".join(wrong["errors"]["prompt"])
    assert 'data-insert="sources"' in panel
    assert 'data-insert="steps.write.sources"' in panel


def test_an_engine_error_lands_on_its_row_when_a_blank_row_comes_first(
    story: Recipe, web: Client, base: KnowledgeBase
) -> None:
    fields = step_fields(**source_row(0), **source_row(1, knowledge_base="lighthouse"))
    fields["sources-1-query"] = "{steps.nope.response}"
    fields["sources-TOTAL_FORMS"] = "2"

    response = htmx_post(web, reverse("recipe-step-panel", args=["story"]), draft(story), **fields)

    answer = live_answer(response)
    assert not any(name.startswith("sources-0-") for name in answer["errors"])
    assert "nope" in " ".join(answer["errors"]["sources-1-query"])
    assert answer["result"] is None
