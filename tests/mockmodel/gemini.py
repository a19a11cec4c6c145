"""The Gemini API (``generateContent`` / ``streamGenerateContent``), for Gemini CLI.

Reference: https://ai.google.dev/api/generate-content. A
:class:`~.server.ToolCall` becomes one ``functionCall`` part, an
:class:`~.server.Answer` one ``text`` part. ``usageMetadata.promptTokenCount``
*includes* the cached tokens (``cachedContentTokenCount``), as Google reports
them; Gemini has no cache-write count, so a step's ``cache_write_tokens`` is
not sent. Streaming (``?alt=sse``) sends the whole candidate as one event.
``countTokens`` is answered without consuming a step.
"""

from __future__ import annotations

from typing import Any

from .server import MODEL_CALL, Answer, HttpError, Reply, Request, ToolCall, _ModelCall

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def model_of(request: Request) -> str:
    """The model named in ``/v1beta/models/<model>:<method>``."""
    tail = request.path.rsplit("/models/", 1)[-1]
    return tail.split(":", 1)[0]


class GeminiGenerateContent:
    name = "gemini"

    def route(self, request: Request) -> Reply | _ModelCall | None:
        if request.method != "POST" or "/models/" not in request.path:
            return None
        method = request.path.rsplit(":", 1)[-1]
        if method == "countTokens":
            return Reply(json_body={"totalTokens": 100})
        if method in ("generateContent", "streamGenerateContent"):
            return MODEL_CALL
        return None

    def reply(self, request: Request, step: ToolCall | Answer, index: int) -> Reply:
        parts: list[dict[str, Any]]
        if isinstance(step, Answer):
            parts = [{"text": step.text}]
        else:
            parts = [{"text": step.text}] if step.text else []
            parts.append({"functionCall": {"name": step.name, "args": step.arguments}})
        u = step.usage
        prompt = u.input_tokens + u.cache_read_tokens
        usage: dict[str, int] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": u.output_tokens,
            "totalTokenCount": prompt + u.output_tokens,
        }
        if u.cache_read_tokens:
            usage["cachedContentTokenCount"] = u.cache_read_tokens
        body = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": model_of(request),
            "responseId": f"resp_mock_{index:04d}",
        }
        if request.wants_stream:
            return Reply(sse=[(None, body)])
        return Reply(json_body=body)

    def error(self, request: Request, step: HttpError) -> Reply:
        status = _STATUS.get(step.status, "UNKNOWN")
        body = {"error": {"code": step.status, "message": step.message or status, "status": status}}
        return Reply(step.status, body)


DIALECT = GeminiGenerateContent()
