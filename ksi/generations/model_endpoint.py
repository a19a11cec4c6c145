"""The ``model`` distiller's provider side: one structured-output call to Anthropic or OpenAI.

Kept apart from the questions asked (:mod:`ksi.generations.model_calls`) and
the rounds (:mod:`ksi.generations.model_distiller`): this is the only module
that knows how each provider's client library is built, how it is made to
answer in the note schema, how it counts tokens, and what its errors mean.
The key is read from its variable when a client is built, and never kept.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import warnings
from typing import Any

import attrs

from ksi.errors import DistillationFailed, KsiWarning
from ksi.generations.agent_distiller import SCHEMA
from ksi.models import Usage
from ksi.pricing import estimate, table_version

#: The extra that installs the client libraries and the price table.
INSTALL_HINT = "pip install 'ksi[model]'"
#: provider -> (the module its client library is, the variable its key is usually in).
PROVIDERS: dict[str, tuple[str, str]] = {
    "anthropic": ("anthropic", "ANTHROPIC_API_KEY"),
    "openai": ("openai", "OPENAI_API_KEY"),
}
#: ``api_key_env=none``: an endpoint that takes no key (a local server); this is sent.
NO_KEY = "ksi-no-key"
#: The tool an Anthropic model is made to call: its input is the answer.
TOOL_NAME = "write_notes"


def _strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """:data:`SCHEMA` as OpenAI's strict structured outputs take it: every property
    required (an optional one may be null or empty) and no length keywords."""
    out = copy.deepcopy(schema)

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("minLength", None)
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(out)
    return out


STRICT_SCHEMA = _strict_schema(SCHEMA)


@attrs.frozen
class ModelAnswer:
    """What came back: the answer's text, its usage, and the notes object when the API
    gave it parsed (an Anthropic tool call's input); else the text is parsed."""

    text: str
    usage: Usage
    data: Any = None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def message(exc: BaseException) -> str:
    """An SDK error's own message, on one line (its body, which never holds the key)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return " ".join(str(exc).split())[:300]


@attrs.frozen
class ModelEndpoint:
    """A model behind its provider's API, as the distiller's options name it (see
    :class:`~ksi.generations.model_distiller.ModelDistiller` for each option)."""

    provider: str
    model: str
    base_url: str
    api_key_env: str
    api: str
    timeout_sec: float
    max_retries: int
    max_tokens: int

    def check(self) -> None:
        """Raise :class:`ValueError` for options that cannot work, when the run is set up.

        A missing extra stops the run before any attempt runs; find_spec looks
        the packages up without importing them.
        """
        module = PROVIDERS[self.provider][0]
        missing = [
            name for name in (module, "genai_prices") if importlib.util.find_spec(name) is None
        ]
        if missing:
            raise ValueError(
                f"the {self.provider} provider needs the {' and '.join(missing)} package(s), "
                f"which are not installed: {INSTALL_HINT}"
            )
        if self.provider == "anthropic" and self.api != "chat":
            raise ValueError("option 'api': only the openai provider has a choice of API")
        if self.key_env() is None and not self.base_url:
            raise ValueError("api_key_env=none (no key) needs a base_url (a local endpoint)")

    # -- credentials -----------------------------------------------------------
    def key_env(self) -> str | None:
        """The variable the key is read from (None: no key is sent)."""
        if self.api_key_env.strip().lower() == "none":
            return None
        return self.api_key_env or PROVIDERS[self.provider][1]

    def where(self) -> str:
        return self.base_url or f"the {self.provider} API"

    def refused(self, status: int | None, exc: BaseException) -> str:
        """Why a 401/403 answer stops the calls, naming the variable to fix."""
        var = self.key_env()
        held = f"the key in {var}" if var else "the request (no key was sent: api_key_env=none)"
        return (
            f"{self.where()} refused {held} (HTTP {status}: {message(exc)}); "
            f"set {var or 'api_key_env'} to a valid key for model {self.model!r}"
        )

    def failure(self, exc: BaseException) -> tuple[str, bool]:
        """A failed call's reason, and whether the endpoint refused the key (no more calls)."""
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            return self.refused(status, exc), True
        if status is None:
            return f"could not reach {self.where()} ({type(exc).__name__}: {message(exc)})", False
        if status in (408, 409, 429) or status >= 500:  # what the libraries retry
            return f"HTTP {status} after {self.max_retries} retries ({message(exc)})", False
        return f"HTTP {status} ({message(exc)})", False

    def client(self, *, retries: int | None = None, timeout: float | None = None) -> Any:
        """A client of the provider's library (imported here: a heavy optional extra)."""
        var = self.key_env()
        key = NO_KEY if var is None else os.environ.get(var, "")
        if not key:
            raise DistillationFailed(f"{var} is not set (the key for {self.where()})")
        options: dict[str, Any] = {
            "api_key": key,
            "max_retries": self.max_retries if retries is None else retries,
            "timeout": self.timeout_sec if timeout is None else timeout,
        }
        if self.base_url:
            options["base_url"] = self.base_url
        if self.provider == "anthropic":
            import anthropic  # the optional extra ksi[model]: only when a model is called

            return anthropic.Anthropic(**options)
        import openai  # the optional extra ksi[model]: only when a model is called

        return openai.OpenAI(**options)

    def preflight(self) -> list[str]:
        """The key is set and the endpoint takes it (a model listing, which costs nothing).

        401/403 and an endpoint that cannot be reached are problems; an endpoint
        without a model list (404), or one busy now (429, 5xx), is not: the
        distillation retries and falls back on its own.
        """
        var = self.key_env()
        if var is not None and not os.environ.get(var):
            return [
                f"--distiller model: {var} is not set; it must hold the {self.provider} key "
                f"for {self.where()} (or name another variable with "
                "--distiller-option api_key_env=NAME)"
            ]
        if estimate(self.model, input_tokens=1, output_tokens=1, provider=self.provider) is None:
            warnings.warn(
                f"--distiller model: {table_version()} has no price for {self.model!r}; its "
                "calls' tokens are counted but not their cost, so --max-cost does not see them",
                KsiWarning,
                stacklevel=3,
            )
        client = self.client(retries=1, timeout=min(self.timeout_sec, 30.0))
        try:
            client.models.list()
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                return [f"--distiller model: {self.refused(status, exc)}"]
            if status is None:
                return [
                    f"--distiller model: cannot reach {self.where()} "
                    f"({type(exc).__name__}: {message(exc)})"
                ]
        finally:
            client.close()
        return []

    # -- one call ----------------------------------------------------------------
    def ask(self, client: Any, system: str, prompt: str) -> ModelAnswer:
        """One structured-output call; its answer, not yet validated."""
        if self.provider == "anthropic":
            return self._ask_anthropic(client, system, prompt)
        fmt = {"type": "json_schema", "name": "notes", "schema": STRICT_SCHEMA, "strict": True}
        if self.api == "responses":
            resp = client.responses.create(
                model=self.model,
                instructions=system,
                input=prompt,
                text={"format": fmt},
                max_output_tokens=self.max_tokens,
            )
            u = resp.usage
            details = getattr(u, "input_tokens_details", None)
            cached = _int(getattr(details, "cached_tokens", 0))
            written = _int(getattr(details, "cache_write_tokens", 0))
            inp, out, text = _int(u.input_tokens), _int(u.output_tokens), resp.output_text
        else:
            chat = client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
                response_format={
                    "type": "json_schema",
                    "json_schema": {k: v for k, v in fmt.items() if k != "type"},
                },
                max_completion_tokens=self.max_tokens,
            )
            u = chat.usage
            details = getattr(u, "prompt_tokens_details", None)
            cached = _int(getattr(details, "cached_tokens", 0))
            # LiteLLM-style proxies count a cache write inside prompt_tokens, beside it.
            written = _int(getattr(details, "cache_write_tokens", 0)) or _int(
                (getattr(u, "model_extra", None) or {}).get("cache_creation_input_tokens")
            )
            inp, out = _int(u.prompt_tokens), _int(u.completion_tokens)
            text = (chat.choices[0].message.content or "") if chat.choices else ""
        usage = Usage(
            # OpenAI counts cached tokens inside the input; KSI's input is the uncached part.
            input_tokens=max(inp - cached - written, 0),
            output_tokens=out,
            cache_read_tokens=cached,
            cache_write_tokens=written,
            turns=1,
        )
        return ModelAnswer(text, usage)

    def _ask_anthropic(self, client: Any, system: str, prompt: str) -> ModelAnswer:
        msg = client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=system,
            messages=[{"role": "user", "content": prompt}],
            tools=[
                {
                    "name": TOOL_NAME,
                    "description": "Record the notes for the next attempts.",
                    "input_schema": SCHEMA,
                }
            ],
            tool_choice={"type": "tool", "name": TOOL_NAME},
        )
        u = msg.usage
        usage = Usage(
            input_tokens=_int(u.input_tokens),
            output_tokens=_int(u.output_tokens),
            cache_read_tokens=_int(getattr(u, "cache_read_input_tokens", 0)),
            cache_write_tokens=_int(getattr(u, "cache_creation_input_tokens", 0)),
            turns=1,
        )
        texts = []
        for block in msg.content:
            if block.type == "tool_use" and block.name == TOOL_NAME:
                return ModelAnswer(json.dumps(block.input), usage, block.input)
            if block.type == "text":
                texts.append(block.text)
        # A proxy that ignores tool_choice may answer in text: take JSON there too.
        return ModelAnswer("".join(texts), usage)
