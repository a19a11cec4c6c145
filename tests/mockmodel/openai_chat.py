"""The OpenAI Chat Completions API (``POST /v1/chat/completions``), JSON and SSE.

For the CLIs that speak it: OpenCode (its ``@ai-sdk/openai-compatible``
provider), mini-SWE-agent and Aider (both through litellm). Reference:
https://platform.openai.com/docs/api-reference/chat. A
:class:`~.server.ToolCall` becomes one ``tool_calls`` entry (``finish_reason:
tool_calls``), an :class:`~.server.Answer` the message ``content`` (``stop``).

Usage follows the OpenAI wire format: ``prompt_tokens`` *include* cached
tokens (``prompt_tokens_details.cached_tokens``); a cache write is sent the
way LiteLLM's proxy and Anthropic-compatible gateways send it
(``cache_creation_input_tokens``, also inside ``prompt_tokens``), with
``cache_read_input_tokens`` beside it. Streaming sends the text or the call
as deltas, then (always, whether or not ``stream_options.include_usage``
asked) a last chunk with no choices and the usage, then ``[DONE]``.
"""

from __future__ import annotations

import json
from typing import Any

from .openai_common import error_reply, models_reply, prompt_tokens
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

_CREATED = 1_700_000_000


def usage_body(step: ToolCall | Answer) -> dict[str, Any]:
    u = step.usage
    prompt = prompt_tokens(u.input_tokens, u.cache_read_tokens, u.cache_write_tokens)
    body: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": u.output_tokens,
        "total_tokens": prompt + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    }
    if u.cache_write_tokens or u.cache_read_tokens:
        body["cache_read_input_tokens"] = u.cache_read_tokens
        body["cache_creation_input_tokens"] = u.cache_write_tokens
    return body


def _message(step: ToolCall | Answer, index: int) -> dict[str, Any]:
    if isinstance(step, Answer):
        return {"role": "assistant", "content": step.text}
    call = {
        "id": tool_call_id(index),
        "type": "function",
        "function": {"name": step.name, "arguments": json.dumps(step.arguments)},
    }
    return {"role": "assistant", "content": step.text or None, "tool_calls": [call]}


class OpenAIChat:
    name = "openai-chat"

    def route(self, request: Request) -> Reply | _ModelCall | None:
        models = models_reply(request)
        if models is not None:
            return models
        if request.method == "POST" and request.path.rstrip("/").endswith("/chat/completions"):
            return MODEL_CALL
        return None

    def reply(self, request: Request, step: ToolCall | Answer, index: int) -> Reply:
        model = str((request.body or {}).get("model") or "mock-model")
        finish = "tool_calls" if isinstance(step, ToolCall) else "stop"
        ident = f"chatcmpl-mock{index:04d}"
        head = {"id": ident, "created": _CREATED, "model": model}
        message = _message(step, index)
        if not request.wants_stream:
            body = {
                **head,
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage_body(step),
            }
            return Reply(json_body=body)
        chunk = {**head, "object": "chat.completion.chunk"}

        def delta(d: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {**chunk, "choices": [{"index": 0, "delta": d, "finish_reason": finish_reason}]}

        events: list[tuple[str | None, Any]] = [(None, delta({"role": "assistant", "content": ""}))]
        if message.get("content"):
            events.append((None, delta({"content": message["content"]})))
        for i, call in enumerate(message.get("tool_calls") or []):
            events.append((None, delta({"tool_calls": [{"index": i, **call}]})))
        events.append((None, delta({}, finish)))
        events.append((None, {**chunk, "choices": [], "usage": usage_body(step)}))
        events.append((None, "[DONE]"))
        return Reply(sse=events)

    def error(self, request: Request, step: HttpError) -> Reply:
        return error_reply(step)


DIALECT = OpenAIChat()
