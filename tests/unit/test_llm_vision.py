"""Image input and llm.vision: the client against the scripted server over real HTTP, and the
error mapping that tells an image refusal from other failures."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMImagesRejected, LLMRequestError, LLMUnavailable, error_for_status
from gateway.llm.images import has_images, image_part, text_part, without_images
from tests.fakes.llm import Reply, ScriptedLLM
from tests.unit.test_llm_client import make_settings

PIXEL = "data:image/png;base64,iVBORw0KGgo="


def with_image(text: str = "what is this?") -> list[dict[str, Any]]:
    return [{"role": "user", "content": [text_part(text), image_part(PIXEL)]}]


def sent_images(request: dict[str, Any]) -> int:
    content = request["messages"][-1]["content"]
    return sum(p.get("type") == "image_url" for p in content) if isinstance(content, list) else 0


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Invalid content type. image_url is only supported by certain models."),
        (400, "Qwen3 is not a multimodal model"),
        (404, "No endpoints found that support image input"),
        (500, "image input is not supported - hint: you may need to provide the mmproj"),
    ],
)
def test_image_refusals_are_recognised(status: int, message: str) -> None:
    error = error_for_status(status, message, model="m", endpoint="/chat/completions")
    assert isinstance(error, LLMImagesRejected)


def test_other_failures_stay_what_they_are() -> None:
    crash = error_for_status(500, "CUDA out of memory", model="m", endpoint="/x")
    assert isinstance(crash, LLMUnavailable)
    tools = error_for_status(400, "tool calls are not supported", model="m", endpoint="/x")
    assert not isinstance(tools, LLMImagesRejected)


def test_without_images_keeps_the_text_and_leaves_the_input_alone() -> None:
    messages = [{"role": "system", "content": "s"}, *with_image()]
    stripped = without_images(messages, "[no image]")
    assert stripped[1] == {"role": "user", "content": "what is this?\n\n[no image]"}
    assert has_images(messages) and not has_images(stripped)
    assert stripped[0] is messages[0]


async def test_auto_falls_back_once_and_remembers(llm: ScriptedLLM) -> None:
    llm.push(
        Reply.error(400, "image_url is only supported by certain models"),
        Reply.text("I read your words."),
        Reply.text("Again without images."),
    )
    async with LLMClient(make_settings(llm.url)) as client:
        assert client.vision.accepts_images is None
        first = await client.complete(with_image())
        assert first.content == "I read your words."
        assert client.vision.accepts_images is False
        second = await client.complete(with_image("and now?"))
    assert second.content == "Again without images."
    assert [sent_images(r) for r in llm.requests] == [1, 0, 0]
    retry = llm.requests[1]["messages"][-1]["content"]
    assert retry.startswith("what is this?\n\n[This image cannot be shown to you")


async def test_auto_retries_a_vague_refusal_but_learns_only_when_it_helps(
    llm: ScriptedLLM,
) -> None:
    # A 400 that does not say why: tried again without images, and that fails too, so the
    # model is not marked as blind and the second error is what the caller gets.
    llm.push(Reply.error(400, "bad request"), Reply.error(400, "bad request again"))
    async with LLMClient(make_settings(llm.url)) as client:
        with pytest.raises(LLMRequestError, match="bad request again"):
            await client.complete(with_image())
        assert client.vision.accepts_images is None


async def test_auto_marks_a_model_that_took_images(llm: ScriptedLLM) -> None:
    llm.push(Reply.text("A red square."))
    async with LLMClient(make_settings(llm.url)) as client:
        await client.complete(with_image())
        assert client.vision.accepts_images is True
    assert sent_images(llm.requests[0]) == 1


async def test_on_raises_and_off_never_sends(llm: ScriptedLLM) -> None:
    llm.push(Reply.error(400, "image_url is only supported by certain models"))
    async with LLMClient(make_settings(llm.url, vision="on")) as client:
        with pytest.raises(LLMImagesRejected) as refused:
            await client.complete(with_image())
    assert "llm.vision" in refused.value.user_message
    llm.push(Reply.text("text only"))
    async with LLMClient(make_settings(llm.url, vision="off", vision_model="eyes")) as client:
        await client.complete(with_image())
    assert sent_images(llm.requests[1]) == 0
    assert "call vision_analyze" in llm.requests[1]["messages"][-1]["content"]


async def test_a_500_image_refusal_is_not_retried_as_an_outage(llm: ScriptedLLM) -> None:
    llm.push(
        Reply.error(500, "image input is not supported - you may need to provide the mmproj"),
        Reply.text("fine without"),
    )
    async with LLMClient(make_settings(llm.url)) as client:
        completion = await client.complete(with_image())
    assert completion.content == "fine without" and len(llm.requests) == 2
