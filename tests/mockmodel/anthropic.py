"""The Anthropic Messages API (``POST /v1/messages``), JSON and SSE, for Claude Code.

Reference: https://docs.claude.com/en/api/messages and .../messages-streaming.
A :class:`~.server.ToolCall` becomes one ``tool_use`` block (``stop_reason:
tool_use``), an :class:`~.server.Answer` one ``text`` block (``end_turn``).
Streaming sends ``message_start`` with the input and cache numbers (output 1,
as the real API does), the blocks as deltas, and ``message_delta`` with the
final output count. ``count_tokens``, and the model list (``GET /v1/models``
from a client that sends ``anthropic-version``, as the SDK does), are answered
without consuming a step.
"""

from __future__ import annotations

import json
from typing import Any

from .server import (
    MODEL_CALL,
    Answer,
    HttpError,
    Reply,
    Request,
    ToolCall,
    _ModelCall,
    tool_call_id,
)

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _usage(step: ToolCall | Answer) -> dict[str, int]:
    u = step.usage
    return {
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cache_read_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
    }


def _blocks(step: ToolCall | Answer, index: int) -> list[dict[str, Any]]:
    if isinstance(step, Answer):
        return [{"type": "text", "text": step.text}]
    blocks: list[dict[str, Any]] = []
    if step.text:
        blocks.append({"type": "text", "text": step.text})
    blocks.append(
        {"type": "tool_use", "id": tool_call_id(index), "name": step.name, "input": step.arguments}
    )
    return blocks


_MODELS = {
    "data": [
        {
            "type": "model",
            "id": "claude-mock",
            "display_name": "Claude Mock",
            "created_at": "2025-01-01T00:00:00Z",
        }
    ],
    "has_more": False,
    "first_id": "claude-mock",
    "last_id": "claude-mock",
}


class AnthropicMessages:
    name = "anthropic"

    def route(self, request: Request) -> Reply | _ModelCall | None:
        if (
            request.method == "GET"
            and request.path.rstrip("/").endswith("/v1/models")
            and "anthropic-version" in request.headers
        ):
            return Reply(json_body=_MODELS)
        if request.method != "POST" or not request.path.startswith("/v1/messages"):
            return None
        if request.path.endswith("/count_tokens"):
            return Reply(json_body={"input_tokens": 100})
        return MODEL_CALL

    def reply(self, request: Request, step: ToolCall | Answer, index: int) -> Reply:
        model = str((request.body or {}).get("model") or "claude-mock")
        blocks = _blocks(step, index)
        stop = "tool_use" if isinstance(step, ToolCall) else "end_turn"
        message = {
            "id": f"msg_mock_{index:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": _usage(step),
        }
        if not request.wants_stream:
            return Reply(json_body=message, headers={"request-id": f"req_mock_{index:04d}"})
        start_usage = {**_usage(step), "output_tokens": 1}
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": start_usage,
                    },
                },
            ),
        ]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                events += [
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    ),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    ),
                ]
            else:
                events += [
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {**block, "input": {}},
                        },
                    ),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(block["input"]),
                            },
                        },
                    ),
                ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": step.usage.output_tokens},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return Reply(sse=events, headers={"request-id": f"req_mock_{index:04d}"})

    def error(self, request: Request, step: HttpError) -> Reply:
        kind = _ERROR_TYPES.get(step.status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": step.message or kind}}
        return Reply(step.status, body, headers={"request-id": "req_mock_error"})


DIALECT = AnthropicMessages()
