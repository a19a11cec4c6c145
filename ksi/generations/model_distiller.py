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

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ksi.errors import DistillationFailed
from ksi.generations.evidence_distiller import evidence_notes
from ksi.generations.model_calls import (
    SYSTEM,
    Call,
    CallLog,
    CallResult,
    checked,
    shared_calls,
    task_call,
)
from ksi.generations.model_endpoint import PROVIDERS, ModelEndpoint
from ksi.hookspecs import Register, hookimpl
from ksi.knowledge.models import DistillRequest, DistillResult
from ksi.models import Usage, total_usage
from ksi.pricing import priced

#: Where each call's request and answer are kept, in the distillation's directory.
CALLS_FILE = "calls.jsonl"


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
        self.endpoint.check()

    @property
    def endpoint(self) -> ModelEndpoint:
        """The model these options name (built on use: it holds no state of its own)."""
        return ModelEndpoint(
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            api=self.api,
            timeout_sec=self.timeout_sec,
            max_retries=self.max_retries,
            max_tokens=self.max_tokens,
        )

    def preflight(self) -> list[str]:
        """The key is set and the endpoint takes it (see :meth:`ModelEndpoint.preflight`)."""
        return self.endpoint.preflight()

    def _call(
        self, client: Any, call: Call, request: DistillRequest, refused: threading.Event
    ) -> CallResult:
        """``call``, asked and checked; every failure is a reason, never an exception."""
        if refused.is_set():
            return CallResult(call, failure="not asked: the endpoint refused the key before")
        endpoint = self.endpoint
        try:
            answer = endpoint.ask(client, SYSTEM, call.prompt)
        except Exception as exc:
            why, stop = endpoint.failure(exc)
            if stop:
                refused.set()
            return CallResult(call, failure=why)
        # Each call is priced on its own: a price may depend on a request's size.
        usage = priced(answer.usage, self.model, provider=self.provider)
        return checked(call, answer, usage, request)

    # -- the distillation ---------------------------------------------------------
    def distill(self, request: DistillRequest) -> DistillResult:
        if not request.evidence:
            return _fallback(request, Usage(), ["no task has a scored attempt to learn from"])
        log = CallLog(Path(request.workdir) / CALLS_FILE)
        refused = threading.Event()
        try:
            client = self.endpoint.client()
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

                per_task = run([task_call(t, request, self.max_notes) for t in request.evidence])
                shared: list[CallResult] = []
                learnt = {r.call.task_id: r.notes for r in per_task if r.notes}
                if self.shared_notes and learnt and not refused.is_set():
                    shared = run(shared_calls(request, learnt, self.max_notes))
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


@hookimpl(trylast=True)
def ksi_register_distillers(register: Register) -> None:
    register(ModelDistiller)
