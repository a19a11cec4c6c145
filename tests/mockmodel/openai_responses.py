"""The OpenAI Responses API (``POST /v1/responses``), SSE, for Codex.

Reference: https://platform.openai.com/docs/api-reference/responses-streaming.
A :class:`~.server.ToolCall` becomes one ``function_call`` output item (its
``call_id`` from :func:`~.server.tool_call_id`), an :class:`~.server.Answer`
one assistant ``message`` item with ``output_text``. Events:
``response.created``, per item ``response.output_item.added`` / text deltas /
``response.output_item.done``, then ``response.completed`` whose
``response.usage`` carries ``input_tokens`` (*including*
``input_tokens_details.cached_tokens``), ``output_tokens`` and
``total_tokens``. The WebSocket transport Codex tries first (``GET
/v1/responses`` with ``Upgrade: websocket``) is not claimed, so the server's
404 sends Codex to plain HTTPS at once. A JSON (non-streaming) reply is sent
when the request does not ask for a stream. OpenCode's side call for a
session title (no tools, a "title generator" instruction) is answered
without consuming a step.
"""

from __future__ import annotations

import json
from typing import Any

from .openai_common import error_reply, models_reply, prompt_tokens
from .server import (
    MODEL_CALL,
    Answer,
    HttpError,
    MockUsage,
    Reply,
    Request,
    ToolCall,
    _ModelCall,
    tool_call_id,
)

_CREATED = 1_700_000_000


def usage_body(step: ToolCall | Answer) -> dict[str, Any]:
    u = step.usage
    prompt = prompt_tokens(u.input_tokens, u.cache_read_tokens, u.cache_write_tokens)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + u.output_tokens,
    }


def _items(step: ToolCall | Answer, index: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text = step.text
    if text:
        items.append(
            {
                "type": "message",
                "id": f"msg_mock_{index:04d}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    if isinstance(step, ToolCall):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_mock_{index:04d}",
                "call_id": tool_call_id(index),
                "name": step.name,
                "arguments": json.dumps(step.arguments),
                "status": "completed",
                **({"namespace": step.namespace} if step.namespace else {}),
            }
        )
    return items


def _is_title_request(request: Request) -> bool:
    body = request.body if isinstance(request.body, dict) else {}
    if body.get("tools"):
        return False
    first = (body.get("input") or [{}])[0]
    text = json.dumps(first.get("content") if isinstance(first, dict) else first)
    return "title generator" in text


class OpenAIResponses:
    name = "openai-responses"

    def route(self, request: Request) -> Reply | _ModelCall | None:
        models = models_reply(request)
        if models is not None:
            return models
        if request.method != "POST" or not request.path.rstrip("/").endswith("/responses"):
            return None
        if _is_title_request(request):
            return self.reply(request, Answer("Mock session", MockUsage()), 9999)
        return MODEL_CALL

    def reply(self, request: Request, step: ToolCall | Answer, index: int) -> Reply:
        model = str((request.body or {}).get("model") or "mock-model")
        items = _items(step, index)
        response: dict[str, Any] = {
            "id": f"resp_mock_{index:04d}",
            "object": "response",
            "created_at": _CREATED,
            "model": model,
            "status": "completed",
            "output": items,
            "usage": usage_body(step),
        }
        if not request.wants_stream:
            return Reply(json_body=response)
        started = {**response, "status": "in_progress", "output": [], "usage": None}
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": started}),
        ]
        for i, item in enumerate(items):
            events.append(
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": i, "item": item},
                )
            )
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append(
                    (
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": i,
                            "content_index": 0,
                            "delta": text,
                        },
                    )
                )
            events.append(
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": i, "item": item},
                )
            )
        events.append(("response.completed", {"type": "response.completed", "response": response}))
        return Reply(sse=events)

    def error(self, request: Request, step: HttpError) -> Reply:
        return error_reply(step)


DIALECT = OpenAIResponses()
