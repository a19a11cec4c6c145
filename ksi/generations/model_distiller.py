"""The ``model`` distiller: notes written by a model called directly, without an agent CLI.

``--distiller model --distiller-option provider=anthropic --distiller-option
model=claude-sonnet-4-5`` (or ``provider=openai``, with ``api=chat`` or
``api=responses``; an OpenAI-compatible ``base_url`` reaches a local or
proxied model). It calls the model through the provider's official client
library (``pip install 'ksi[model]'``: ``anthropic``, ``openai`` and
``genai-prices``), in two rounds, each ``max_parallel`` calls at a time:

1. **per task**: one call per task of the evidence, with that task's graded
   attempts and its notes so far, asking for notes about that task;
2. **shared, per target**: for every task the next generation will run (each
   task of the evidence not solved yet: what the default strategy runs
   again), one call with that task's prompt and what the round-1 notes of the
   *other* tasks say, asking which of it carries over; those notes are about
   the target task and cite the other tasks' attempts.

Every answer is structured output (a forced ``write_notes`` tool call on
Anthropic, a JSON schema response format on OpenAI) validated against the
``agent`` distiller's note schema (:data:`~ksi.generations.agent_distiller.SCHEMA`,
attrs + cattrs, unknown keys refused). A task whose call fails (an HTTP
error after the retries, an answer that is not the schema, no note citing an
attempt) keeps the ``evidence`` distiller's notes, and the fallback reason
names it; when every round-1 call fails the generation gets the ``evidence``
notes, as with the ``agent`` distiller.

The client libraries retry 429 and 5xx answers (and dropped connections)
with exponential backoff, honouring ``Retry-After``, up to ``max_retries``
times; a call is counted once, with the usage of the answer that arrived.
The APIs report tokens only, so the cost is estimated from the
``genai-prices`` table (:mod:`ksi.pricing`) and counts toward ``--max-cost``;
the stored notes' usage says it is estimated and from which table version.

Credentials: the key is read from the variable ``api_key_env`` names, when
a call is made; only the variable's *name* is an option (in ``run.json``),
and the key is never logged or written. Before a run's first attempt,
:meth:`ModelDistiller.preflight` lists the endpoint's models (a free call):
a missing key, or one the endpoint refuses (401/403), or an endpoint that
cannot be reached, stops the run there (exit code 2), naming the variable.
A key refused later (revoked mid-run) makes that generation fall back to the
``evidence`` notes, with the reason; its remaining calls are not made.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.errors import DistillationFailed, KsiWarning
from ksi.generations.agent_distiller import SCHEMA, forum_evidence, notes_from_data
from ksi.generations.evidence_distiller import evidence_notes
from ksi.hookspecs import Register, hookimpl
from ksi.knowledge.models import (
    INSIGHT_KINDS,
    DistillRequest,
    DistillResult,
    Note,
    TaskEvidence,
)
from ksi.models import Usage, is_solved, total_usage
from ksi.pricing import estimate, priced, table_version
from ksi.serialization import to_data

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
#: Where each call's request and answer are kept, in the distillation's directory.
CALLS_FILE = "calls.jsonl"

SYSTEM = """\
You review what coding agents did on programming tasks, to help the next attempts at them.
Each attempt was graded by the task's tests (score 0..1; 1 solves the task). Write notes
the next agent can act on: what the tests expect, what failed and why, what to check first,
what not to try again. Be concrete and checkable; never invent what the evidence does not
show. Every note cites the attempt ids ("attempt_id" values) it rests on, and names in
"replaces" the ids of earlier notes it supersedes ([] for none). Answer with the notes
object only: {"notes": [{"kind", "text", "task_id", "applies_when", "evidence",
"replaces"}]}."""

TASK_PROMPT = """\
Task {task_id}. Below, as JSON: its prompt, this generation's graded attempts (best first:
score, the agent's final message, files touched, the eval output of failing attempts, the
best attempt's diff, and a digest of what the agent did: the commands that failed and
their error lines, the step at which it first ran the tests, the commands it repeated, the
files its tools named) and the score history, the posts of the forum where agents holding
those attempts compared notes ("forum": each with its id and the attempts it rests on;
empty without a forum), then the notes the attempts were given so far.

Write at most {max_notes} notes about this task: "kind" one of {kinds}; "text" what the next
agent should know; "task_id" "{task_id}"; "applies_when" when it applies ("" for always);
"evidence" the attempt ids (or forum post ids) it rests on; "replaces" the ids of notes so
far that a new note supersedes on the same point ([] for none).

{evidence}"""

SHARED_PROMPT = """\
The next attempts at task {task_id} will read these notes. Its prompt:

{prompt}

Below, as JSON, what was learnt on the OTHER tasks of this run (their notes, each with the
attempt ids it rests on, and their best scores). Which of it carries over to task
{task_id} (the repository's conventions, the test harness, tools, pitfalls)? Write at most
{max_notes} notes for task {task_id}, each citing the attempt ids of what it draws on; leave
out what does not apply. If nothing carries over, answer {{"notes": []}}.

{others}"""


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
class Call:
    """One question to the model: about ``task_id`` (round 1) or for it (round 2)."""

    round: str  # "task" or "shared"
    task_id: str
    prompt: str


@attrs.frozen
class CallResult:
    call: Call
    notes: tuple[Note, ...] = ()
    usage: Usage = attrs.field(factory=Usage)
    #: Why the call gave no notes ("" when it did, or when a shared call found none to give).
    failure: str = ""
    #: The answer's text, as it came (kept in ``calls.jsonl``).
    answer: str = ""


@attrs.frozen
class ModelAnswer:
    """What came back: the answer's text, its usage, and the notes object when the API
    gave it parsed (an Anthropic tool call's input); else the text is parsed."""

    text: str
    usage: Usage
    data: Any = None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _from_text(text: str) -> Any:
    """The JSON object in a text answer (a fenced block is unwrapped)."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        return json.loads(body)
    except ValueError as exc:
        raise DistillationFailed(f"the answer is not JSON ({exc}): {text[:200]!r}") from exc


@attrs.define
class ModelDistiller:
    """Asks a model, through its provider's client library, for notes on each task."""

    name: ClassVar[str] = "model"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "A model called directly (--distiller-option provider=anthropic|openai, model=...; "
        "pip install 'ksi[model]') writes notes per task and cross-task notes per target task; "
        "falls back to evidence notes."
    )

    #: ``anthropic`` (Messages API) or ``openai`` (Chat Completions or Responses).
    provider: str = attrs.field(validator=attrs.validators.in_(tuple(PROVIDERS)))
    #: The model, as the API names it (``claude-sonnet-4-5``, ``gpt-4o-mini``).
    model: str = attrs.field(validator=attrs.validators.min_len(1))
    #: The endpoint ("" : the provider's own, or its SDK's ``*_BASE_URL`` variable). For
    #: ``openai`` it ends in ``/v1`` as the SDK expects (``http://127.0.0.1:8000/v1``).
    base_url: str = ""
    #: The variable holding the key ("" : ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``;
    #: ``none``: the endpoint takes no key). Only this name is stored, never the key.
    api_key_env: str = ""
    #: ``openai`` only: ``chat`` (Chat Completions, what compatible servers speak) or
    #: ``responses``.
    api: str = attrs.field(default="chat", validator=attrs.validators.in_(("chat", "responses")))
    #: Most calls at once.
    max_parallel: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    #: Seconds one call may take.
    timeout_sec: float = attrs.field(default=300.0, validator=attrs.validators.gt(0))
    #: Retries of a call answered 429 or 5xx (or cut off), with backoff, by the client library.
    max_retries: int = attrs.field(default=4, validator=attrs.validators.ge(0))
    #: Most output tokens one answer may have.
    max_tokens: int = attrs.field(default=4096, validator=attrs.validators.ge(1))
    #: Most notes asked for per call.
    max_notes: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    #: Round 2: for each task to run again, the other tasks' notes that carry over.
    shared_notes: bool = True
    #: Also keep the ``evidence`` distiller's notes (facts) after the model's.
    with_evidence: bool = True

    def __attrs_post_init__(self) -> None:
        # A missing extra stops the run when it is set up, before any attempt runs;
        # find_spec looks the packages up without importing them.
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
        if self._key_env() is None and not self.base_url:
            raise ValueError("api_key_env=none (no key) needs a base_url (a local endpoint)")

    # -- credentials -----------------------------------------------------------
    def _key_env(self) -> str | None:
        """The variable the key is read from (None: no key is sent)."""
        if self.api_key_env.strip().lower() == "none":
            return None
        return self.api_key_env or PROVIDERS[self.provider][1]

    def _where(self) -> str:
        return self.base_url or f"the {self.provider} API"

    def _refused(self, status: int | None, exc: BaseException) -> str:
        var = self._key_env()
        held = f"the key in {var}" if var else "the request (no key was sent: api_key_env=none)"
        return (
            f"{self._where()} refused {held} (HTTP {status}: {_message(exc)}); "
            f"set {var or 'api_key_env'} to a valid key for model {self.model!r}"
        )

    def _client(self, *, retries: int | None = None, timeout: float | None = None) -> Any:
        """A client of the provider's library (imported here: a heavy optional extra)."""
        var = self._key_env()
        key = NO_KEY if var is None else os.environ.get(var, "")
        if not key:
            raise DistillationFailed(f"{var} is not set (the key for {self._where()})")
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
        var = self._key_env()
        if var is not None and not os.environ.get(var):
            return [
                f"--distiller model: {var} is not set; it must hold the {self.provider} key "
                f"for {self._where()} (or name another variable with "
                "--distiller-option api_key_env=NAME)"
            ]
        if estimate(self.model, input_tokens=1, output_tokens=1, provider=self.provider) is None:
            warnings.warn(
                f"--distiller model: {table_version()} has no price for {self.model!r}; its "
                "calls' tokens are counted but not their cost, so --max-cost does not see them",
                KsiWarning,
                stacklevel=2,
            )
        client = self._client(retries=1, timeout=min(self.timeout_sec, 30.0))
        try:
            client.models.list()
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                return [f"--distiller model: {self._refused(status, exc)}"]
            if status is None:
                return [
                    f"--distiller model: cannot reach {self._where()} "
                    f"({type(exc).__name__}: {_message(exc)})"
                ]
        finally:
            client.close()
        return []

    # -- one call ----------------------------------------------------------------
    def _ask(self, client: Any, prompt: str) -> ModelAnswer:
        """One structured-output call; its answer, not yet validated."""
        if self.provider == "anthropic":
            msg = client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=SYSTEM,
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
        fmt = {"type": "json_schema", "name": "notes", "schema": STRICT_SCHEMA, "strict": True}
        if self.api == "responses":
            resp = client.responses.create(
                model=self.model,
                instructions=SYSTEM,
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
                    {"role": "system", "content": SYSTEM},
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

    def _call(
        self, client: Any, call: Call, request: DistillRequest, refused: threading.Event
    ) -> CallResult:
        """``call``, validated; every failure is a reason, never an exception."""
        if refused.is_set():
            return CallResult(call, failure="not asked: the endpoint refused the key before")
        try:
            answer = self._ask(client, call.prompt)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status in (401, 403):
                refused.set()
                return CallResult(call, failure=self._refused(status, exc))
            if status is not None:
                why = f"HTTP {status} ({_message(exc)})"
                if status in (408, 409, 429) or status >= 500:  # what the libraries retry
                    why = f"HTTP {status} after {self.max_retries} retries ({_message(exc)})"
            else:
                why = f"could not reach {self._where()} ({type(exc).__name__}: {_message(exc)})"
            return CallResult(call, failure=why)
        # Each call is priced on its own: a price may depend on a request's size.
        usage = priced(answer.usage, self.model, provider=self.provider)
        where = f"the {call.round} answer for {call.task_id}"
        try:
            data = answer.data if answer.data is not None else _from_text(answer.text)
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in call.task_id)
            notes, dropped = notes_from_data(
                data,
                request,
                source=where,
                schema_name="the note schema",
                id_prefix=f"g{request.generation}-m{'t' if call.round == 'task' else 's'}-{safe}-",
                for_task=call.task_id,
            )
        except DistillationFailed as exc:
            return CallResult(call, usage=usage, failure=str(exc), answer=answer.text)
        if not notes and (dropped or call.round == "task"):
            why = (
                f"none of its {dropped} notes cites an attempt of the evidence"
                if dropped
                else "it wrote no notes"
            )
            return CallResult(call, usage=usage, failure=f"{where}: {why}", answer=answer.text)
        return CallResult(call, tuple(notes), usage, answer=answer.text)

    # -- the distillation ---------------------------------------------------------
    def distill(self, request: DistillRequest) -> DistillResult:
        if not request.evidence:
            return _fallback(request, Usage(), ["no task has a scored attempt to learn from"])
        log = _CallLog(Path(request.workdir) / CALLS_FILE)
        refused = threading.Event()
        try:
            client = self._client()
        except DistillationFailed as exc:
            return _fallback(request, Usage(), [str(exc)])
        try:
            with ThreadPoolExecutor(self.max_parallel, thread_name_prefix="ksi-distill") as pool:

                def run(calls: Sequence[Call]) -> list[CallResult]:
                    results = list(
                        pool.map(lambda c: self._call(client, c, request, refused), calls)
                    )
                    for result in results:
                        log.add(result)
                    return results

                per_task = run([self._task_call(t, request) for t in request.evidence])
                shared: list[CallResult] = []
                learnt = {r.call.task_id: r.notes for r in per_task if r.notes}
                if self.shared_notes and learnt and not refused.is_set():
                    shared = run(self._shared_calls(request, learnt))
        finally:
            client.close()
        results = per_task + shared
        usage = total_usage([r.usage for r in results])
        failures = [f"{r.call.task_id}: {r.failure}" for r in results if r.failure]
        if not learnt:
            return _fallback(request, usage, failures)
        failed = {r.call.task_id for r in per_task if not r.notes}
        facts = evidence_notes(request)
        if not self.with_evidence:
            # A task whose call failed still gets its facts (and the shared summary).
            facts = tuple(n for n in facts if n.task_id is None or n.task_id in failed)
        notes = tuple(n for r in results for n in r.notes)
        fallback = ""
        if failures:
            fallback = (
                "model distiller: "
                + "; ".join(failures)
                + (
                    f"; the evidence distiller's notes stand for {', '.join(sorted(failed))}"
                    if failed
                    else ""
                )
            )
        return DistillResult(notes=(*notes, *facts), usage=usage, fallback=fallback)

    def _task_call(self, task: TaskEvidence, request: DistillRequest) -> Call:
        previous = [
            {"id": n.id, "kind": n.kind, "text": n.text, "applies_when": n.applies_when}
            for n in (request.previous.notes if request.previous else ())
            if n.task_id == task.task_id and n.kind in INSIGHT_KINDS
        ]
        payload = {
            "task": to_data(task),
            "forum": forum_evidence(request, (task.task_id,)),
            "notes_so_far": previous,
        }
        return Call(
            "task",
            task.task_id,
            TASK_PROMPT.format(
                task_id=task.task_id,
                max_notes=self.max_notes,
                kinds=", ".join(INSIGHT_KINDS),
                evidence=json.dumps(payload, indent=1, ensure_ascii=False),
            ),
        )

    def _shared_calls(
        self, request: DistillRequest, learnt: dict[str, tuple[Note, ...]]
    ) -> list[Call]:
        """Round 2: one call per task to run again, given what the *other* tasks taught."""
        calls = []
        for target in request.evidence:
            best = max((s for _, _, s in target.score_history), default=None)
            if is_solved(best, request.solved_threshold):
                continue  # the default strategy does not run it again
            others = [
                {
                    "task_id": t.task_id,
                    "best_score": max((s for _, _, s in t.score_history), default=None),
                    "notes": [
                        {"kind": n.kind, "text": n.text, "evidence": list(n.attempts)}
                        for n in learnt[t.task_id]
                    ],
                }
                for t in request.evidence
                if t.task_id != target.task_id and t.task_id in learnt
            ]
            if not others:
                continue
            calls.append(
                Call(
                    "shared",
                    target.task_id,
                    SHARED_PROMPT.format(
                        task_id=target.task_id,
                        prompt=target.prompt,
                        max_notes=self.max_notes,
                        others=json.dumps(others, indent=1, ensure_ascii=False),
                    ),
                )
            )
        return calls


def _message(exc: BaseException) -> str:
    """An SDK error's own message, on one line (its body, which never holds the key)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return " ".join(str(exc).split())[:300]


def _fallback(request: DistillRequest, usage: Usage, failures: list[str]) -> DistillResult:
    return DistillResult(
        notes=evidence_notes(request),
        usage=usage,
        fallback=(
            f"model distiller: {'; '.join(failures) or 'no notes'}; "
            "the evidence distiller's notes were used"
        ),
        written_by="evidence",
    )


class _CallLog:
    """``calls.jsonl`` in the distillation's directory: each call's prompt, answer, usage
    and failure, for inspection (no header, so never the key)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()

    def add(self, result: CallResult) -> None:
        line = {
            "round": result.call.round,
            "task_id": result.call.task_id,
            "prompt": result.call.prompt,
            "answer": result.answer,
            "note_ids": [n.id for n in result.notes],
            "usage": to_data(result.usage),
            "failure": result.failure,
        }
        with self._lock, open(self._path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


@hookimpl(trylast=True)
def ksi_register_distillers(register: Register) -> None:
    register(ModelDistiller)
