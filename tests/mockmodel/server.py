"""A scripted model server on 127.0.0.1 that real agent CLIs talk to in tests.

No LLM provider is reachable from tests, but the agent CLIs are real programs
that speak HTTP to one. :class:`MockModel` stands in: it listens on
``127.0.0.1`` on a free port in a daemon thread, answers each *model call* with
the next :class:`Step` of a per-test script (a tool call, a final answer, an
HTTP error, a hang), reports known usage numbers on every call, and logs every
request it received so a test can assert what the CLI sent (model, key header,
tool results) and what was served (``served_usage()``).

How a dialect plugs in
----------------------
One API shape (Anthropic Messages, Gemini generateContent, OpenAI Chat
Completions, OpenAI Responses) is one module in this package exposing a
:class:`Dialect` object (by convention ``DIALECT``). Add it to
``all_dialects()`` in ``tests/mockmodel/__init__.py`` (or pass ``dialects=`` to
:class:`MockModel`). For every request the server asks each dialect in order
``route(request)``:

* ``None``: not mine, try the next dialect (404 when nobody claims it);
* a :class:`Reply`: an auxiliary endpoint answered directly, consuming no
  step (``GET /v1/models``, token counting, a CLI's side call such as a
  title or "next speaker" check);
* :data:`MODEL_CALL`: a model call; the server takes the next script step and
  calls ``reply(request, step, index)`` for :class:`ToolCall` / :class:`Answer`
  or ``error(request, step)`` for :class:`HttpError` (each API has its own error
  body). :class:`Hang` is handled by the core: no reply until the server closes.

``reply`` builds the JSON body or the SSE event list (``request.wants_stream``
helps decide) and must put ``step.usage`` in the API's usage fields, so that
the CLI's reported totals can be compared with :meth:`MockModel.served_usage`.
``tool_call_id(index)`` gives stable ids.

The server speaks HTTP/1.1: JSON replies carry a Content-Length and keep the
connection; SSE replies are sent with ``Connection: close`` and end at EOF.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import attrs

# -- the script ---------------------------------------------------------------


@attrs.frozen
class MockUsage:
    """Token numbers one model call reports (uncached input, like KSI's Usage)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: MockUsage) -> MockUsage:
        return MockUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@attrs.frozen
class ToolCall:
    """The model asks the CLI to run one of *its* tools (named as that CLI names them)."""

    name: str
    arguments: dict[str, Any]
    usage: MockUsage = MockUsage(100, 20)
    #: Text the model says before the call (some APIs carry both in one message).
    text: str = ""
    #: The Responses API's tool namespace the function is in (Codex offers an MCP
    #: server's tools as namespace ``mcp__<server>``); empty: none.
    namespace: str = ""


@attrs.frozen
class Answer:
    """The model's final text answer (no tool call): the CLI's run ends."""

    text: str
    usage: MockUsage = MockUsage(150, 30)


@attrs.frozen
class HttpError:
    """The call fails with this HTTP status (401 bad key, 429 rate limit, 500...)."""

    status: int
    message: str = ""
    #: ``Retry-After`` seconds sent with a 429 (None: no header).
    retry_after: int | None = None


@attrs.frozen
class Hang:
    """The call never gets an answer (until the server closes): a stuck provider."""


Step = ToolCall | Answer | HttpError | Hang

#: Served when the script has run out and no ``then`` step was given.
EXHAUSTED = Answer("mock model: the test script has no more steps")

UNAUTHORIZED = HttpError(401, "invalid x-api-key")
RATE_LIMITED = HttpError(429, "rate limit exceeded", retry_after=1)


# -- what was received ----------------------------------------------------------


@attrs.frozen
class Request:
    """One HTTP request as received (body parsed as JSON when it is JSON)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names
    raw_body: bytes
    body: Any

    @property
    def wants_stream(self) -> bool:
        """Whether the client asked for server-sent events."""
        if isinstance(self.body, dict) and self.body.get("stream") is True:
            return True
        return "sse" in self.query.get("alt", []) or ":stream" in self.path


@attrs.frozen
class Served:
    """A model call and the step that answered it."""

    request: Request
    step: Step
    index: int
    dialect: str


@attrs.frozen
class Reply:
    """What a dialect sends back: a JSON body or a list of SSE events."""

    status: int = 200
    json_body: Any = None
    #: ``(event_name or None, data)``: data is JSON-encoded unless it is a str.
    sse: Sequence[tuple[str | None, Any]] | None = None
    headers: dict[str, str] = attrs.field(factory=dict)


class _ModelCall:
    def __repr__(self) -> str:
        return "MODEL_CALL"


#: Returned by :meth:`Dialect.route` for a request that consumes a script step.
MODEL_CALL = _ModelCall()


class Dialect(Protocol):
    """One provider API shape (see the module docstring)."""

    name: str

    def route(self, request: Request) -> Reply | _ModelCall | None: ...

    def reply(self, request: Request, step: ToolCall | Answer, index: int) -> Reply: ...

    def error(self, request: Request, step: HttpError) -> Reply: ...


def tool_call_id(index: int) -> str:
    """A stable id for the tool call served as model call ``index``."""
    return f"toolu_mock_{index:04d}"


# -- the server -------------------------------------------------------------------


class MockModel:
    """A scripted model server on 127.0.0.1 (use as a context manager, or start()/close())."""

    def __init__(
        self,
        script: Iterable[Step] = (),
        *,
        then: Step = EXHAUSTED,
        dialects: Sequence[Dialect] | None = None,
        on_request: Callable[[Request], None] | None = None,
        port: int = 0,
        api_key: str | None = None,
    ) -> None:
        if dialects is None:
            from . import all_dialects  # the package imports this module first

            dialects = all_dialects()
        self.dialects = list(dialects)
        self._script = list(script)
        self._then = then
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._on_request = on_request
        #: Every request received, in arrival order.
        self.requests: list[Request] = []
        #: Every model call and the step that answered it.
        self.served: list[Served] = []
        #: 0: any free port (a test that must reuse a URL across runs names one).
        self._port = port
        #: When set, the only key accepted: any other is refused with 401 on every
        #: endpoint (the model list included), consuming no step, as a provider does.
        self._api_key = api_key
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle
    def start(self) -> MockModel:
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="mock-model", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> MockModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "MockModel is not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no path)."""
        return f"http://127.0.0.1:{self.port}"

    # -- the script
    def push(self, *steps: Step) -> None:
        """Append steps to the script (e.g. from a test between runs)."""
        with self._lock:
            self._script.extend(steps)

    def _next_step(self, request: Request, dialect: str) -> tuple[Step, int]:
        with self._lock:
            step = self._script.pop(0) if self._script else self._then
            index = len(self.served)
            self.served.append(Served(request, step, index, dialect))
        return step, index

    # -- what happened
    def model_calls(self) -> list[Served]:
        with self._lock:
            return list(self.served)

    def served_usage(self) -> MockUsage:
        """The usage of every answered call (tool calls and answers, not errors or hangs)."""
        total = MockUsage()
        for s in self.model_calls():
            if isinstance(s.step, ToolCall | Answer):
                total = total + s.step.usage
        return total

    def answered_calls(self) -> int:
        return sum(isinstance(s.step, ToolCall | Answer) for s in self.model_calls())

    # -- one request (called by the handler thread)
    def _handle(self, request: Request) -> Reply | None:
        with self._lock:
            self.requests.append(request)
        if self._on_request is not None:
            self._on_request(request)
        for dialect in self.dialects:
            routed = dialect.route(request)
            if routed is None:
                continue
            if self._api_key is not None and _sent_key(request) != self._api_key:
                return dialect.error(request, UNAUTHORIZED)
            if isinstance(routed, Reply):
                return routed
            step, index = self._next_step(request, dialect.name)
            if isinstance(step, Hang):
                self._closing.wait()
                return None
            if isinstance(step, HttpError):
                reply = dialect.error(request, step)
                if step.retry_after is not None:
                    reply.headers.setdefault("retry-after", str(step.retry_after))
                return reply
            return dialect.reply(request, step, index)
        return Reply(
            404, {"error": f"mock model: no dialect serves {request.method} {request.path}"}
        )


def _sent_key(request: Request) -> str | None:
    """The API key a request carries (``x-api-key``, or ``Authorization: Bearer``)."""
    if "x-api-key" in request.headers:
        return request.headers["x-api-key"]
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" else None


def _make_handler(mock: MockModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            body: Any = None
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
            parts = urlsplit(self.path)
            request = Request(
                method=self.command,
                path=parts.path,
                query=parse_qs(parts.query),
                headers={k.lower(): v for k, v in self.headers.items()},
                raw_body=raw,
                body=body,
            )
            reply = mock._handle(request)
            if reply is None:  # a hang ended by close()
                self.close_connection = True
                return
            if reply.sse is not None:
                self._send_sse(reply)
            else:
                self._send_json(reply)

        def _send_json(self, reply: Reply) -> None:
            data = json.dumps(reply.json_body).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _send_sse(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.close_connection = True
            assert reply.sse is not None
            for event, data in reply.sse:
                text = data if isinstance(data, str) else json.dumps(data)
                chunk = (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
                self.wfile.write(chunk.encode())
                self.wfile.flush()
                time.sleep(0)

        do_GET = do_POST = do_PUT = do_DELETE = _serve

    return Handler
