"""What the two OpenAI API shapes (Chat Completions, Responses) share: errors, the model list.

Reference: https://platform.openai.com/docs/guides/error-codes. An error is
``{"error": {"message", "type", "code", "param"}}``; ``GET /v1/models`` (some
CLIs list models at start-up) is answered without consuming a script step.
"""

from __future__ import annotations

from .server import HttpError, Reply, Request

#: HTTP status -> (error type, error code) as OpenAI sends them.
_ERRORS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def error_reply(step: HttpError) -> Reply:
    kind, code = _ERRORS.get(step.status, ("server_error", None))
    message = step.message or kind
    if step.status == 401 and not step.message.startswith("Incorrect"):
        message = f"Incorrect API key provided: {message}"
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return Reply(step.status, body)


def models_reply(request: Request) -> Reply | None:
    """``GET /v1/models``: one mock model, so a CLI's start-up listing succeeds."""
    if request.method == "GET" and request.path.rstrip("/").endswith("/models"):
        return Reply(json_body={"object": "list", "data": [_MODEL]})
    return None


_MODEL = {"id": "mock-model", "object": "model", "created": 1_700_000_000, "owned_by": "mock"}


def prompt_tokens(input_tokens: int, cache_read: int, cache_write: int) -> int:
    """OpenAI's ``prompt_tokens``/``input_tokens`` *include* cached tokens (and, as LiteLLM
    and Anthropic-compatible gateways report it, cache writes)."""
    return input_tokens + cache_read + cache_write
