"""The ``model`` distiller's questions and the checking of their answers.

What is asked (the system prompt, one question per task, one cross-task
question per target task) and what an answer must be to count (the note
schema, at least one note citing an attempt of the evidence), apart from
how a provider is called (:mod:`ksi.generations.model_endpoint`) and the
rounds (:mod:`ksi.generations.model_distiller`).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import attrs

from ksi.errors import DistillationFailed
from ksi.generations.agent_distiller import forum_evidence, notes_from_data
from ksi.generations.model_endpoint import ModelAnswer
from ksi.knowledge.models import INSIGHT_KINDS, DistillRequest, Note, TaskEvidence
from ksi.models import Usage, is_solved
from ksi.serialization import to_data

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


def task_call(task: TaskEvidence, request: DistillRequest, max_notes: int) -> Call:
    """Round 1: the question about one task, with its attempts and its notes so far."""
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
            max_notes=max_notes,
            kinds=", ".join(INSIGHT_KINDS),
            evidence=json.dumps(payload, indent=1, ensure_ascii=False),
        ),
    )


def shared_calls(
    request: DistillRequest, learnt: dict[str, tuple[Note, ...]], max_notes: int
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
                    max_notes=max_notes,
                    others=json.dumps(others, indent=1, ensure_ascii=False),
                ),
            )
        )
    return calls


def checked(call: Call, answer: ModelAnswer, usage: Usage, request: DistillRequest) -> CallResult:
    """``answer`` validated against the note schema; a failure is a reason, never raised.

    A task's question must give a note citing an attempt; a cross-task one may
    give none (nothing carried over), unless every note it gave was dropped.
    """
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


class CallLog:
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
