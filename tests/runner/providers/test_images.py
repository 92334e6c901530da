"""Images reach each model server in its wire format: OpenAI-compatible servers and Ollama as
`image_url` data URLs, Anthropic as base64 image blocks, Gemini as inline data."""

from __future__ import annotations

import base64
from typing import Any

from runner.providers import ChatRequest, ImagePart
from runner.providers.scripted import ScriptedProvider
from tests.documents import jpeg, png
from tests.runner.providers.conftest import MakeNative, MakeProvider
from tests.runner.providers.stub_server import StubServer, reply

PICTURE = ImagePart("image/png", png(8, 6))
PHOTO = ImagePart("image/jpeg", jpeg(8, 6))


def ask(**options: Any) -> ChatRequest:
    return ChatRequest(prompt="What is in the picture?", model="model-1", **options)


def data_url(image: ImagePart) -> str:
    return f"data:{image.media_type};base64,{base64.b64encode(image.data).decode()}"


def test_openai_and_ollama_get_image_url_parts_after_the_text(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("A red square."))

    result = any_provider().complete(ask(images=(PICTURE, PHOTO), system="Look closely."))

    assert result.text == "A red square."
    [sent] = stub_server.chat_requests
    assert sent.path == "/v1/chat/completions"
    assert sent.json["messages"] == [
        {"role": "system", "content": "Look closely."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in the picture?"},
                {"type": "image_url", "image_url": {"url": data_url(PICTURE)}},
                {"type": "image_url", "image_url": {"url": data_url(PHOTO)}},
            ],
        },
    ]
    assert sent.prompt == "What is in the picture?"


def test_a_streamed_call_carries_its_images_too(
    any_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("A red square."))
    tokens: list[str] = []

    any_provider().complete(ask(images=(PICTURE,)), on_token=tokens.append)

    [sent] = stub_server.chat_requests
    assert sent.json["stream"] is True
    parts = sent.json["messages"][0]["content"]
    assert parts[1] == {"type": "image_url", "image_url": {"url": data_url(PICTURE)}}
    assert "".join(tokens) == "A red square."


def test_a_conversation_shows_its_images_with_the_first_user_message(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("Done."))
    conversation = (
        {"role": "user", "content": "What is in the picture?"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "user", "content": "And now?"},
    )

    openai_provider().complete(ask(images=(PICTURE,), messages=conversation))

    [sent] = stub_server.chat_requests
    first, _, last = sent.json["messages"]
    assert first["content"][1]["image_url"]["url"] == data_url(PICTURE)
    assert last["content"] == "And now?"


def test_a_call_without_images_sends_its_prompt_as_text(
    openai_provider: MakeProvider, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("Hello."))
    openai_provider().complete(ask())
    [sent] = stub_server.chat_requests
    assert sent.json["messages"] == [{"role": "user", "content": "What is in the picture?"}]


def test_anthropic_gets_base64_image_blocks(
    anthropic_provider: MakeNative, stub_server: StubServer
) -> None:
    stub_server.enqueue(reply("A red square."))

    result = anthropic_provider().complete(ask(images=(PICTURE, PHOTO)))

    assert result.text == "A red square."
    [sent] = stub_server.chat_requests
    assert sent.path == "/v1/messages"
    [message] = sent.json["messages"]
    assert message["content"] == [
        {"type": "text", "text": "What is in the picture?"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PICTURE.data).decode(),
            },
        },
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/jpeg",
                "data": base64.b64encode(PHOTO.data).decode(),
            },
        },
    ]


def test_gemini_gets_inline_data(gemini_provider: MakeNative, stub_server: StubServer) -> None:
    stub_server.enqueue(reply("A red square."))

    result = gemini_provider().complete(ask(images=(PICTURE,)))

    assert result.text == "A red square."
    [sent] = stub_server.chat_requests
    [content] = sent.json["contents"]
    text, image = content["parts"]
    assert text == {"text": "What is in the picture?"}
    inline = image["inlineData"]
    # The SDK writes the blob's fields as the API's protobuf JSON reads them (either case).
    assert inline.get("mimeType", inline.get("mime_type")) == "image/png"
    assert base64.b64decode(inline["data"]) == PICTURE.data


def test_a_script_answers_as_if_there_were_no_images() -> None:
    provider = ScriptedProvider({"replies": ["scripted"]})
    assert provider.complete(ask(images=(PICTURE,))).text == "scripted"


def test_an_image_part_never_shows_its_bytes() -> None:
    assert repr(PICTURE) == f"ImagePart('image/png', {len(PICTURE.data)} bytes)"
    assert "images=(ImagePart('image/png'" in repr(ask(images=(PICTURE,)))
