"""The ``agent`` distiller: any agent plugin writes structured notes from the evidence.

``--distiller agent --distiller-option agent=claude-code`` (any registered
agent, or a ``file.py:Class`` reference). The agent runs as an ordinary
attempt (so every environment, timeout, log and process rule applies) in
``distill/<generation>/`` of the run, on a task whose ``repo/`` holds:

* ``evidence.json``: the generation's evidence (scored attempts only), the
  posts of its forum (``forum``, when it had one) and the notes before it;
* ``schema.json``: the shape of the answer;

and is asked to write ``repo/notes.json``: ``{"notes": [{kind, text, task_id,
applies_when, evidence}]}`` with ``kind`` one of insight, constraint,
rejected_hypothesis, pitfall, check, next_step and ``evidence`` the attempt ids
the note rests on (a post's id stands for the attempts the post rests on, and
the note names the post). The answer is validated (attrs + cattrs, unknown keys
refused); ids that are not attempts of the evidence are dropped, and so is a
note left with none. If the agent fails, writes nothing, or writes something
invalid, the generation gets the ``evidence`` distiller's notes and the
fallback reason is stored with them. What the agent spent counts toward the
run's spend and ``--max-cost``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection
from pathlib import Path
from typing import Any, ClassVar

import attrs
import cattrs

from ksi.errors import DistillationFailed
from ksi.generations.evidence_distiller import evidence_notes
from ksi.hookspecs import Register, hookimpl
from ksi.kinds import AGENT
from ksi.knowledge.models import INSIGHT_KINDS, DistillRequest, DistillResult, Note
from ksi.models import TaskSpec, Usage
from ksi.serialization import to_data, validation_problems
from ksi.task_parts import StartingFiles

NOTES_FILE = "notes.json"
PROMPT = """\
You are reviewing what coding agents did on a set of tasks, to help the next attempts.

`repo/evidence.json` holds, per task, this generation's graded attempts (score, the
agent's final message, the files it touched, the eval output of failing attempts, the
best attempt's diff, and a digest of what the agent did: the commands that failed and
their error lines, the step at which it first ran the tests, the commands it repeated,
the files its tools named) and the score history, the posts of the forum where agents
holding those attempts compared notes (`forum`: each with its id, its task or null for
all tasks, and the attempts it rests on), plus the notes written so far
(`previous_notes`). `repo/schema.json` describes the answer.

Write `repo/notes.json`: {{"notes": [...]}}, each note {{"kind": one of {kinds},
"text": what the next agent should know, "task_id": the task it is about or null for
every task, "applies_when": when it applies ("" for always), "evidence": [the
attempt ids (the "attempt_id" values) or forum post ids (the "id" values) the note
rests on], "replaces": [the ids of notes in `previous_notes` it supersedes, on the same
point; [] for none]}}. Prefer concrete, checkable notes: what the tests expect, what
failed and why, what to check first. Write at most {max_notes} notes.
"""


def _kind(_: Any, attribute: Any, value: str) -> None:
    if value not in INSIGHT_KINDS:
        raise ValueError(
            f"{attribute.name}: expected one of {', '.join(INSIGHT_KINDS)}, got {value!r}"
        )


@attrs.frozen
class DraftNote:
    """One note as the agent writes it."""

    kind: str = attrs.field(validator=_kind)
    text: str = attrs.field(validator=attrs.validators.min_len(1))
    evidence: tuple[str, ...]
    task_id: str | None = None
    applies_when: str = ""
    #: Ids of earlier notes (the request's ``previous``) this one supersedes.
    replaces: tuple[str, ...] = ()


@attrs.frozen
class DraftNotes:
    notes: tuple[DraftNote, ...]


_strict = cattrs.Converter(forbid_extra_keys=True)

SCHEMA = {
    "type": "object",
    "required": ["notes"],
    "additionalProperties": False,
    "properties": {
        "notes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kind", "text", "evidence"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": list(INSIGHT_KINDS)},
                    "text": {"type": "string", "minLength": 1},
                    "task_id": {"type": ["string", "null"]},
                    "applies_when": {"type": "string"},
                    "evidence": {"type": "array", "items": {"type": "string"}},
                    "replaces": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    },
}


#: The name this module gave :class:`~ksi.errors.DistillationFailed` (:func:`parse_notes`
#: raised it), kept for code that catches it.
DistillFailed = DistillationFailed


def parse_notes(raw: str, request: DistillRequest) -> tuple[list[Note], int]:
    """The agent's notes as :class:`Note` values, and how many were dropped.

    Raises :class:`~ksi.errors.DistillationFailed` for text that is not the schema's JSON.
    """
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise DistillationFailed(f"{NOTES_FILE} is not JSON ({exc})") from exc
    return notes_from_data(data, request, source=NOTES_FILE, schema_name="schema.json")


def notes_from_data(
    data: Any,
    request: DistillRequest,
    *,
    source: str,
    schema_name: str,
    id_prefix: str | None = None,
    for_task: str | None = None,
) -> tuple[list[Note], int]:
    """Notes from an answer already parsed as JSON (:data:`SCHEMA`'s shape), and how
    many were dropped: citing no attempt of the evidence, or about an unknown task.
    A note's ``replaces`` keeps only ids of the request's earlier notes.

    ``for_task`` makes every note about that task, whatever the answer says (a
    distiller that asked about one task); ``id_prefix`` (default ``g<g>-a``) keeps
    the ids of several answers apart. Raises :class:`~ksi.errors.DistillationFailed`
    naming ``source`` when the data does not follow the schema.
    """
    try:
        drafts = _strict.structure(data, DraftNotes)
    except Exception as exc:
        details = "; ".join(validation_problems(exc))
        raise DistillationFailed(f"{source} does not follow {schema_name}: {details}") from exc
    known = {a for t in request.evidence for _, a, _ in t.score_history}
    earlier = {n.id for n in request.previous.notes} if request.previous is not None else set()
    posts = {p.id: p for p in request.forum}
    tasks = {t.task_id for t in request.evidence}
    prefix = id_prefix if id_prefix is not None else f"g{request.generation}-a"
    notes: list[Note] = []
    dropped = 0
    for draft in drafts.notes:
        named = tuple(e for e in draft.evidence if e in posts)
        cited = tuple(
            dict.fromkeys(
                a
                for e in draft.evidence
                for a in (posts[e].attempts if e in posts else (e,))
                if a in known
            )
        )
        task_id = for_task if for_task is not None else draft.task_id
        if not cited or (task_id is not None and task_id not in tasks):
            dropped += 1
            continue
        notes.append(
            Note(
                id=f"{prefix}{len(notes) + 1:03d}",
                kind=draft.kind,
                text=draft.text.strip(),
                task_id=task_id,
                applies_when=draft.applies_when,
                attempts=cited,
                generation=request.generation,
                replaces=tuple(i for i in draft.replaces if i in earlier),
                posts=named,
            )
        )
    return notes, dropped


def forum_evidence(request: DistillRequest, task_ids: Collection[str]) -> list[dict[str, Any]]:
    """The forum's posts about ``task_ids`` and the shared ones, as a distiller's model reads
    them: each with its id (which a note may cite among its evidence) and the attempts it
    rests on."""
    return [
        {**to_data(p), "attempts": list(p.attempts)}
        for p in request.forum
        if p.task_id is None or p.task_id in task_ids
    ]


@attrs.define
class AgentDistiller:
    """Runs an agent plugin on the evidence and keeps the notes it writes."""

    name: ClassVar[str] = "agent"
    aliases: ClassVar[tuple[str, ...]] = ()
    description: ClassVar[str] = (
        "An agent (--distiller-option agent=NAME) reads the evidence and writes structured "
        "notes (insights, constraints, pitfalls, checks...); falls back to evidence notes."
    )

    #: The agent that writes the notes (a registered name or a file.py:Class reference).
    agent: str = attrs.field(validator=attrs.validators.min_len(1))
    #: Its ``cmd`` (the ``command`` agent's only option), when it takes one.
    cmd: str | None = None
    #: Other agent options, as a JSON object of strings.
    agent_options: str = "{}"
    #: The model it uses (default: the run's ``--model``).
    model: str | None = None
    #: Where it runs (an environment name).
    environment: str = "local"
    timeout_sec: float = 900.0
    #: Most notes it is asked for.
    max_notes: int = 40
    #: Also keep the ``evidence`` distiller's notes (facts) after the agent's.
    with_evidence: bool = True

    def _agent_options(self) -> dict[str, Any]:
        try:
            options = json.loads(self.agent_options)
        except ValueError as exc:
            raise ValueError(f"option 'agent_options': not a JSON object ({exc})") from exc
        if not isinstance(options, dict):
            raise ValueError("option 'agent_options': expected a JSON object")
        if self.cmd is not None:
            options["cmd"] = self.cmd
        return options

    def __attrs_post_init__(self) -> None:
        # A bad JSON object, an unknown agent or missing credentials stop the run
        # before it starts, not after a generation of attempts.
        # start-up: listing components imports this module; this only when used
        import os

        from ksi.attempt.components import resolve
        from ksi.attempt.envscrub import missing_required

        agent, _ = resolve(AGENT, self.agent, self._agent_options())
        problems = missing_required(self.agent, agent.required_env)
        problems.extend(agent.missing_credentials(os.environ))
        if problems:
            raise ValueError("; ".join(problems))

    def distill(self, request: DistillRequest) -> DistillResult:
        usage = Usage()
        try:
            record = self._run_agent(request)
            usage = record.usage
            notes_path = Path(request.workdir) / record.attempt_dir / "captured" / "repo"
            notes_path = notes_path / NOTES_FILE
            if record.status.is_error:
                raise DistillationFailed(
                    f"the agent failed ({record.agent_status or record.status}: "
                    f"{record.error or 'no detail'})"
                )
            try:
                raw = notes_path.read_text(encoding="utf-8")
            except OSError as exc:
                raise DistillationFailed(
                    f"the agent wrote no {NOTES_FILE} in repo/ ({exc.strerror})"
                ) from exc
            notes, dropped = parse_notes(raw, request)
            if not notes:
                raise DistillationFailed(
                    f"none of its {dropped} notes cites an attempt of the evidence"
                    if dropped
                    else "it wrote no notes"
                )
        except DistillationFailed as exc:
            return DistillResult(
                notes=evidence_notes(request),
                usage=usage,
                fallback=f"agent distiller: {exc}; the evidence distiller's notes were used",
                written_by="evidence",
            )
        extra = evidence_notes(request) if self.with_evidence else ()
        return DistillResult(notes=(*notes, *extra), usage=usage)

    def _run_agent(self, request: DistillRequest) -> Any:
        """One attempt of the agent on the evidence task, in ``request.workdir``."""
        # start-up: listing components imports this module; this only when used
        from ksi.attempt.components import resolve
        from ksi.attempt.envscrub import agent_optional_env, scrubbed_env
        from ksi.attempt.execute import run_job
        from ksi.attempt.job import AttemptJob, AttemptSettings, ComponentSpec

        model = self.model or request.model
        options = self._agent_options()
        agent, _ = resolve(AGENT, self.agent, options)
        env = scrubbed_env(
            required=agent.required_env,
            optional=agent_optional_env(agent, model),
            passthrough=(),
        )
        run_tag = {k: v for k, v in request.agent_env.items() if k == "KSI_RUN_ID"}
        payload = {
            "generation": request.generation,
            "evidence": to_data(request.evidence),
            "forum": forum_evidence(request, {t.task_id for t in request.evidence}),
            "previous_notes": to_data(request.previous.notes) if request.previous else [],
        }
        task = TaskSpec(
            id=f"distill-{request.generation}",
            prompt=PROMPT.format(kinds=", ".join(INSIGHT_KINDS), max_notes=self.max_notes),
            starting_files=StartingFiles(
                files={
                    "evidence.json": json.dumps(payload, indent=2, ensure_ascii=False),
                    "schema.json": json.dumps(SCHEMA, indent=2),
                }
            ),
        )
        job = AttemptJob(
            run_id=run_tag.get("KSI_RUN_ID", "distill"),
            session_id=uuid.uuid4().hex,
            run_dir=str(request.workdir),
            task=task,
            attempt=1,
            try_number=0,
            agent=ComponentSpec("agent", self.agent, options),
            environment=ComponentSpec("environment", self.environment),
            evaluator=ComponentSpec("evaluator", "command"),
            settings=AttemptSettings(model=model, timeout_sec=self.timeout_sec),
            agent_env={**env, **run_tag},
            eval_env=dict(run_tag),
        )
        try:
            return run_job(job)
        finally:
            # start-up: listing components imports this module; this only when used
            from ksi.attempt.execute import forget_components

            forget_components(job.session_id)


@hookimpl(trylast=True)
def ksi_register_distillers(register: Register) -> None:
    register(AgentDistiller)
