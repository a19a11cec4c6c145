"""The ``model`` distiller against the scripted mock model server, through real runs.

``--distiller model`` calls the model with the providers' official client
libraries (``anthropic``, ``openai``); the mock (``tests/mockmodel``) speaks the
Anthropic Messages, OpenAI Chat Completions and OpenAI Responses shapes on
127.0.0.1, so no test talks to a real provider. The task agent is a
``command`` agent that writes the port the test wants only when
``KNOWLEDGE.md`` says it; the eval output never does, so only a note the
model wrote can make generation 2 solve.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
from pathlib import Path
from typing import Any

import attrs
import genai_prices
import pytest
from mockmodel import UNAUTHORIZED, Answer, HttpError, MockModel, MockUsage, Request, ToolCall

import ksi
from ksi.errors import OptionsError
from ksi.knowledge.store import read_knowledge
from tests.run_helpers import env_without_ksi_settings, journal_lines, table_price, write_tasks
from tests.run_helpers import ksi as ksi_cli

KEY = "sk-mock-distiller-key"
MARKER = "MOCK-NOTE: the gateway listens on port 8443"
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-4o-mini"}
BETA_NOTE = "The beta port is read from README.md."


def port_task(task_id: str) -> dict[str, Any]:
    """A task whose test wants 8443, which neither its prompt nor its eval output says."""
    return {
        "task_id": task_id,
        "prompt": f"Write the port of the {task_id} service to port.txt.",
        "files": {"README.md": "The gateway.\n"},
        "eval": {"command": 'test "$(cat port.txt)" = 8443', "timeout_sec": 30},
    }


TASK_AGENT = (
    f"if grep -q {shlex.quote(MARKER)} KNOWLEDGE.md 2>/dev/null; "
    "then echo 8443 > repo/port.txt; else echo 80 > repo/port.txt; fi"
)


def notes(*items: tuple[str, str, list[str]], kind: str = "insight") -> dict[str, Any]:
    """The notes object the schema asks for: ``(task_id, text, evidence)`` per note."""
    return {
        "notes": [
            {"kind": kind, "text": text, "task_id": task, "applies_when": "", "evidence": ev}
            for task, text, ev in items
        ]
    }


ANSWER_USAGE = MockUsage(900, 120)


def answer(provider: str, data: Any, usage: MockUsage = ANSWER_USAGE) -> Any:
    """The model's structured answer as each API gives it: Anthropic's forced tool call,
    OpenAI's JSON text."""
    if provider == "anthropic":
        return ToolCall("write_notes", data, usage)
    return Answer(json.dumps(data), usage)


def options(provider: str, mock: MockModel, extra: dict[str, str]) -> dict[str, str]:
    url = mock.url if provider == "anthropic" else mock.url + "/v1"
    return {
        "provider": provider,
        "model": MODELS[provider],
        "base_url": url,
        "max_parallel": "1",  # the script's order is the calls' order
        **extra,
    }


def run(
    tmp_path: Path,
    mock: MockModel,
    provider: str,
    *,
    tasks: tuple[str, ...] = ("port",),
    generations: int = 2,
    **extra: Any,
) -> Any:
    distiller_options = extra.pop("distiller_options", {})
    return ksi.run(
        write_tasks(tmp_path / "tasks.jsonl", [port_task(t) for t in tasks]),
        agent="command",
        agent_options={"cmd": TASK_AGENT},
        run_dir=tmp_path / "run",
        generations=generations,
        distiller="model",
        distiller_options=options(provider, mock, distiller_options),
        wipe_workspace=False,  # keep KNOWLEDGE.md to read
        **extra,
    )


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def sent_key(request: Request) -> str:
    """The key a request carried (``x-api-key``, or ``Authorization: Bearer``)."""
    sent = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    return sent.removeprefix("Bearer ")


def model_calls(mock: MockModel) -> list[Request]:
    return [s.request for s in mock.model_calls()]


def price(model: str, usage: MockUsage) -> float:
    """What the price table says the tokens the mock served cost."""
    return table_price(model, **attrs.asdict(usage))


def knowledge_md(tmp_path: Path, task: str, attempt: int) -> str:
    return (
        tmp_path / "run" / "attempts" / task / str(attempt) / "workspace" / "KNOWLEDGE.md"
    ).read_text()


def every_file_text(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("provider", "api", "path"),
    [
        ("anthropic", "chat", "/v1/messages"),
        ("openai", "chat", "/v1/chat/completions"),
        ("openai", "responses", "/v1/responses"),
    ],
)
def test_a_structured_answer_becomes_notes_the_next_generation_reads(
    tmp_path: Path, provider: str, api: str, path: str
) -> None:
    usage = MockUsage(1200, 150, 300, 0)
    with MockModel([answer(provider, notes(("port", MARKER, ["attempts/port/1"])), usage)]) as mock:
        extra = {"api": api} if provider == "openai" else {}
        summary = run(tmp_path, mock, provider, distiller_options=extra)
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "model" and not stored.fallback
    mine = [n for n in stored.notes if n.text == MARKER]
    assert len(mine) == 1 and mine[0].kind == "insight" and mine[0].task_id == "port"
    assert mine[0].attempts == ("attempts/port/1",)
    assert any(n.kind == "score_history" for n in stored.notes), "evidence notes kept beside"
    # Generation 2 read the model's note, and solved with it.
    assert MARKER in knowledge_md(tmp_path, "port", 2)
    assert [g.solved for g in summary.generations.generations] == [0, 1]
    # One call, in the API's shape, structured, with the key from the environment (the
    # next are generation 2's distillation: the last generation is distilled too).
    call = model_calls(mock)[0]
    assert call.path == path and call.body["model"] == MODELS[provider]
    assert sent_key(call) == KEY
    if provider == "anthropic":
        assert call.body["tool_choice"] == {"type": "tool", "name": "write_notes"}
        assert call.body["tools"][0]["input_schema"]["properties"]["notes"]
    else:
        shape = call.body["response_format"] if api == "chat" else call.body["text"]["format"]
        assert shape["type"] == "json_schema"
    assert "attempts/port/1" in json.dumps(call.body), "the evidence was sent"
    # The preflight listed the models first (free), with the same key.
    first = mock.requests[0]
    assert first.path == "/v1/models" and sent_key(first) == KEY
    # Tokens as served; the cost estimated from the price table, and said to be.
    assert (stored.usage.input_tokens, stored.usage.output_tokens) == (1200, 150)
    assert stored.usage.cache_read_tokens == 300
    assert stored.usage.cost_estimated is True
    assert stored.usage.price_table == f"genai-prices {genai_prices.__version__}"
    assert stored.usage.cost_usd == pytest.approx(price(MODELS[provider], usage))
    assert summary.generations.generations[0].distill_cost_usd == stored.usage.cost_usd
    # What was asked and answered is kept for inspection; the key is nowhere in the run.
    log = [json.loads(x) for x in (tmp_path / "run" / "distill" / "1" / "calls.jsonl").open()]
    assert [(c["round"], c["task_id"], c["failure"]) for c in log] == [("task", "port", "")]
    assert MARKER in log[0]["answer"]
    assert KEY not in every_file_text(tmp_path / "run")


def test_shared_notes_carry_what_other_tasks_taught_to_each_task_to_run_again(
    tmp_path: Path,
) -> None:
    # Round 1 per task (in task id order), then round 2 per target: for alpha (what beta
    # taught: nothing that carries over), then for beta (what alpha taught).
    script = [
        answer("anthropic", notes(("alpha", MARKER, ["attempts/alpha/1"]))),
        answer("anthropic", notes(("beta", BETA_NOTE, ["attempts/beta/1"]))),
        answer("anthropic", {"notes": []}),
        answer("anthropic", notes(("beta", MARKER, ["attempts/alpha/1"]), kind="constraint")),
    ]  # fmt: skip
    with MockModel(script) as mock:
        summary = run(tmp_path, mock, "anthropic", tasks=("alpha", "beta"))
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "model" and not stored.fallback
    shared = [n for n in stored.notes if n.kind == "constraint"]
    assert [(n.task_id, n.text, n.attempts) for n in shared] == [
        ("beta", MARKER, ("attempts/alpha/1",))
    ]
    alpha_shared, beta_shared = (json.dumps(c.body["messages"]) for c in model_calls(mock)[2:4])
    # Each target is shown the other task's notes, not its own.
    assert BETA_NOTE in alpha_shared and MARKER not in alpha_shared
    assert MARKER in beta_shared and BETA_NOTE not in beta_shared
    # beta solved in generation 2 only through the note alpha's attempt taught.
    assert MARKER in knowledge_md(tmp_path, "beta", 2)
    assert [g.solved for g in summary.generations.generations] == [0, 2]


def test_calls_run_in_parallel_up_to_max_parallel(tmp_path: Path) -> None:
    in_flight = 0
    most = 0
    lock = threading.Lock()
    two = threading.Event()

    def on_request(request: Request) -> None:
        nonlocal in_flight, most
        if request.method != "POST":
            return
        with lock:
            in_flight += 1
            most = max(most, in_flight)
            if in_flight >= 2:
                two.set()
        two.wait(20)  # hold each call until a second one is in flight
        with lock:
            in_flight -= 1

    tasks = ("a", "b", "c")
    script = [answer("anthropic", notes((t, f"note {t}", [f"attempts/{t}/1"]))) for t in tasks]
    with MockModel(script, on_request=on_request) as mock:
        run(
            tmp_path, mock, "anthropic", tasks=tasks,
            distiller_options={"max_parallel": "2", "shared_notes": "false"},
        )  # fmt: skip
    assert most == 2, "two calls at once, never three"
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and not stored.fallback
    assert {n.text for n in stored.notes if n.kind == "insight"} == {"note a", "note b", "note c"}


@pytest.mark.parametrize(
    ("provider", "bad", "why"),
    [
        ("openai", Answer("Sure! Here are some notes: port 8443."), "is not JSON"),
        (
            "anthropic",
            ToolCall("write_notes", notes(("port", MARKER, ["attempts/port/1"]), kind="wisdom")),
            "does not follow the note schema: invalid value (kind: expected one of",
        ),
    ],
)
def test_a_malformed_answer_falls_back_to_evidence_notes_with_the_reason(
    tmp_path: Path, provider: str, bad: Any, why: str
) -> None:
    with MockModel([bad]) as mock:
        summary = run(tmp_path, mock, provider)
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "evidence"
    assert "model distiller" in stored.fallback and why in stored.fallback
    assert "evidence distiller's notes were used" in stored.fallback
    assert any(w.startswith("generation 1:") and why in w for w in summary.warnings)
    assert MARKER not in knowledge_md(tmp_path, "port", 2)
    assert [g.solved for g in summary.generations.generations] == [0, 0]
    # The tokens the malformed answer cost still count.
    assert stored.usage.output_tokens == bad.usage.output_tokens
    assert stored.usage.cost_usd == pytest.approx(price(MODELS[provider], bad.usage))


def test_a_429_is_retried_and_the_call_counted_once(tmp_path: Path) -> None:
    usage = MockUsage(1000, 100)
    script = [
        HttpError(429, "rate limit exceeded", retry_after=1),
        answer("anthropic", notes(("port", MARKER, ["attempts/port/1"])), usage),
    ]
    with MockModel(script) as mock:
        summary = run(tmp_path, mock, "anthropic")
    steps = [type(s.step).__name__ for s in mock.model_calls()]
    assert steps[:2] == ["HttpError", "ToolCall"], "retried once, then answered"
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "model" and not stored.fallback
    assert [n.text for n in stored.notes].count(MARKER) == 1
    assert (stored.usage.input_tokens, stored.usage.output_tokens, stored.usage.turns) == (
        1000, 100, 1,
    )  # fmt: skip
    assert stored.usage.cost_usd == pytest.approx(price(MODELS["anthropic"], usage))
    assert [g.solved for g in summary.generations.generations] == [0, 1]


def test_5xx_answers_are_retried_until_the_model_answers(tmp_path: Path) -> None:
    script = [
        HttpError(500, "internal error"),
        HttpError(503, "overloaded"),
        answer("openai", notes(("port", MARKER, ["attempts/port/1"]))),
    ]
    with MockModel(script) as mock:
        summary = run(tmp_path, mock, "openai")
    assert [type(s.step).__name__ for s in mock.model_calls()][:3] == [
        "HttpError", "HttpError", "Answer",
    ]  # fmt: skip
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "model" and not stored.fallback
    assert [g.solved for g in summary.generations.generations] == [0, 1]


def test_5xx_past_the_retries_falls_back_naming_the_status(tmp_path: Path) -> None:
    with MockModel([], then=HttpError(500, "internal error")) as mock:
        run(tmp_path, mock, "openai", distiller_options={"max_retries": "1"})
    # Two distillations (generations 1 and 2), each the call and one retry.
    assert len(mock.model_calls()) == 4
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "evidence"
    assert "HTTP 500 after 1 retries" in stored.fallback


def test_a_refused_key_stops_the_run_before_any_attempt(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [port_task("port")])
    with MockModel([], api_key="the-right-key") as mock:
        result = ksi_cli(
            "run", str(tasks), "--agent", "command", "--agent-option", f"cmd={TASK_AGENT}",
            "--run-dir", str(tmp_path / "run"), "--generations", "2", "--distiller", "model",
            *("--distiller-option", "provider=anthropic"),
            *("--distiller-option", f"model={MODELS['anthropic']}"),
            *("--distiller-option", f"base_url={mock.url}"),
            env=env_without_ksi_settings(ANTHROPIC_API_KEY="sk-wrong"),
        )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ANTHROPIC_API_KEY" in result.stderr and "401" in result.stderr
    assert "sk-wrong" not in result.stdout + result.stderr
    assert mock.model_calls() == [], "no model call was made"
    assert not (tmp_path / "run").exists(), "nothing ran, nothing was written"


def test_a_missing_key_stops_the_run_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with MockModel([]) as mock, pytest.raises(ksi.UserInputError, match="MY_KEY is not set"):
        run(tmp_path, mock, "openai", distiller_options={"api_key_env": "MY_KEY"})
    assert mock.requests == []
    assert not (tmp_path / "run").exists()


def test_a_key_refused_mid_run_falls_back_and_makes_no_further_call(tmp_path: Path) -> None:
    with MockModel([UNAUTHORIZED], then=UNAUTHORIZED) as mock:
        run(tmp_path, mock, "anthropic", tasks=("a", "b"), generations=2)
    # One call per distillation (generations 1 and 2): b's is not made after a's 401.
    assert len(mock.model_calls()) == 2
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "evidence"
    assert "refused the key in ANTHROPIC_API_KEY (HTTP 401" in stored.fallback
    assert "b: not asked" in stored.fallback


def test_the_distillation_cost_counts_toward_max_cost(tmp_path: Path) -> None:
    big = MockUsage(300_000, 2_000)  # about a dollar at the model's price
    with MockModel(
        [answer("anthropic", notes(("port", MARKER, ["attempts/port/1"])), big)]
    ) as mock:
        summary = run(tmp_path, mock, "anthropic", generations=3, max_cost_usd=0.5)
    gens = summary.generations.generations
    assert [g.generation for g in gens] == [1], "generation 2 did not start past --max-cost"
    assert gens[0].distill_cost_usd == pytest.approx(price(MODELS["anthropic"], big))
    assert gens[0].distill_cost_usd > 0.5
    assert not summary.run_complete and "max_cost" in summary.stopped_reason
    assert {r["generation"] for r in journal_lines(tmp_path / "run")} == {1}


def test_a_dry_run_calls_no_model(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "tasks.jsonl", [port_task("port")])
    with MockModel([]) as mock:
        result = ksi_cli(
            "run", str(tasks), "--agent", "command", "--agent-option", "cmd=true",
            "--run-dir", str(tmp_path / "run"), "--generations", "2", "--distiller", "model",
            *("--distiller-option", "provider=openai"),
            *("--distiller-option", f"model={MODELS['openai']}"),
            *("--distiller-option", f"base_url={mock.url}/v1"),
            "--dry-run",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "distiller model" in result.stdout
    assert mock.requests == []


def test_a_missing_extra_is_named_with_its_install_command_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # as if `openai` were not installed
    with MockModel([]) as mock, pytest.raises(OptionsError) as caught:
        run(tmp_path, mock, "openai")
    assert "openai" in str(caught.value) and "pip install 'ksi[model]'" in str(caught.value)
    assert mock.requests == []
    assert not (tmp_path / "run").exists()


def test_bad_options_are_refused_with_the_valid_ones(tmp_path: Path) -> None:
    with MockModel([]) as mock:
        with pytest.raises(OptionsError, match="provider"):
            run(tmp_path, mock, "openai", distiller_options={"provider": "mistral"})
        with pytest.raises(OptionsError, match="only the openai provider"):
            run(tmp_path, mock, "anthropic", distiller_options={"api": "responses"})
    assert mock.requests == []


def test_the_model_reads_the_forum_and_a_note_may_cite_a_post(tmp_path: Path) -> None:
    """With a forum, each task's call holds its posts; a note citing a post's id rests on
    the attempts the post rests on, and names the post."""
    poster = Path(__file__).resolve().parent / "fixtures" / "forum" / "poster.py"
    post = "forum/1/tasks/port/r1p1-1"
    with MockModel([answer("anthropic", notes(("port", MARKER, [post])))]) as mock:
        summary = run(
            tmp_path,
            mock,
            "anthropic",
            forum_rounds=1,
            forum_agent="command",
            forum_agent_options={"cmd": f"python3 {poster} done"},
        )
    sent = json.dumps(model_calls(mock)[0].body)
    assert post in sent and "FINDING r1 p1" in sent, "the post went to the model"
    stored = read_knowledge(tmp_path / "run", 1)
    assert stored is not None and stored.distiller == "model", stored
    mine = [n for n in stored.notes if n.text == MARKER]
    assert [(n.posts, n.attempts) for n in mine] == [((post,), ("attempts/port/1",))]
    assert [g.solved for g in summary.generations.generations] == [0, 1]
