"""A :class:`~ksi.trajectories.models.Trajectory` as an ATIF document, and back.

ATIF (the Agent Trajectory Interchange Format, :data:`ATIF_VERSION`) counts
tokens its own way: a step's ``prompt_tokens`` are *all* its input tokens,
``cached_tokens`` the cache hits among them. KSI's usage keeps uncached input
and cache writes apart (:class:`ksi.models.Usage`), so the cache writes go in
``metrics.extra.cache_write_tokens`` and reading a file back gives the same
numbers. Exit codes and a CLI's "this call failed" go in each observation
result's ``extra``; the workspace the paths are relative to in the root's; a
cost KSI estimated (the CLI reported none) says so in ``final_metrics.extra``
(``cost_estimated``, ``price_table``).

:func:`from_atif` reads what :func:`to_atif` wrote, and is lenient with
other producers' files where ATIF allows more (multimodal content parts are
read as their text); a document it cannot read raises :class:`ValueError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ksi._version import __version__
from ksi.models import Usage
from ksi.trajectories.models import ATIF_VERSION, Step, ToolCall, ToolResult, Trajectory

#: ATIF's ``agent.version`` is required; this stands in when the CLI does not say.
UNKNOWN_VERSION = "unknown"


def _metrics(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
        "completion_tokens": usage.output_tokens,
        "cached_tokens": usage.cache_read_tokens,
    }
    if usage.cost_usd is not None:
        out["cost_usd"] = usage.cost_usd
    if usage.cache_write_tokens:
        out["extra"] = {"cache_write_tokens": usage.cache_write_tokens}
    return out


def _final_metrics(usage: Usage, steps: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "total_prompt_tokens": usage.input_tokens
        + usage.cache_read_tokens
        + usage.cache_write_tokens,
        "total_completion_tokens": usage.output_tokens,
        "total_cached_tokens": usage.cache_read_tokens,
        "total_steps": steps,
    }
    if usage.cost_usd is not None:
        out["total_cost_usd"] = usage.cost_usd
    extra: dict[str, Any] = {"cache_write_tokens": usage.cache_write_tokens}
    if usage.turns is not None:
        extra["turns"] = usage.turns
    if usage.cost_estimated:
        extra["cost_estimated"] = True
        extra["price_table"] = usage.price_table
    out["extra"] = extra
    return out


def _result(result: ToolResult) -> dict[str, Any]:
    out: dict[str, Any] = {"content": result.output}
    if result.call_id is not None:
        out["source_call_id"] = result.call_id
    extra = {
        k: v
        for k, v in (("exit_code", result.exit_code), ("failed", result.failed))
        if v is not None
    }
    if extra:
        out["extra"] = extra
    return out


def _step(number: int, step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"step_id": number, "source": step.source, "message": step.message}
    if step.timestamp is not None:
        out["timestamp"] = step.timestamp
    if step.model is not None:
        out["model_name"] = step.model
    if step.reasoning is not None:
        out["reasoning_content"] = step.reasoning
    if step.tool_calls:
        out["tool_calls"] = [
            {"tool_call_id": c.call_id, "function_name": c.name, "arguments": dict(c.arguments)}
            for c in step.tool_calls
        ]
    if step.results:
        out["observation"] = {"results": [_result(r) for r in step.results]}
    if step.usage is not None:
        out["metrics"] = _metrics(step.usage)
    return out


def to_atif(traj: Trajectory) -> dict[str, Any]:
    """The ATIF document of ``traj`` (JSON-ready), its totals the record's usage when set."""
    agent: dict[str, Any] = {
        "name": traj.agent,
        "version": traj.agent_version or UNKNOWN_VERSION,
        "extra": {"ksi_version": __version__},
    }
    if traj.model:
        agent["model_name"] = traj.model
    doc: dict[str, Any] = {"schema_version": ATIF_VERSION}
    if traj.session_id:
        doc["session_id"] = traj.session_id
    doc["agent"] = agent
    doc["steps"] = [_step(n, s) for n, s in enumerate(traj.steps, start=1)]
    if traj.notes:
        doc["notes"] = "\n".join(traj.notes)
    totals = traj.usage if traj.usage is not None else traj.step_usage()
    doc["final_metrics"] = _final_metrics(totals, len(traj.steps))
    if traj.workspace:
        doc["extra"] = {"workspace": traj.workspace}
    return doc


# -- reading ---------------------------------------------------------------------------


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: expected a string, got {type(value).__name__}")


def _extra(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = obj.get("extra")
    return extra if isinstance(extra, Mapping) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text(value: Any, where: str) -> str:
    """A message or content: a string, or the text of ATIF's content parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(p.get("text") or "") for p in value if isinstance(p, Mapping) and p.get("text")
        )
    raise ValueError(f"{where}: expected text, got {type(value).__name__}")


def _usage_from(metrics: Any, prefix: str, where: str) -> Usage | None:
    if metrics is None:
        return None
    m = _obj(metrics, where)
    extra = _extra(m)
    prompt, cached = _int(m.get(f"{prefix}prompt_tokens")), _int(m.get(f"{prefix}cached_tokens"))
    written = _int(extra.get("cache_write_tokens"))
    cost = m.get(f"{prefix}cost_usd")
    turns = extra.get("turns")
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        output_tokens=_int(m.get(f"{prefix}completion_tokens")),
        cache_read_tokens=cached,
        cache_write_tokens=written,
        cost_usd=float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool)
        else None,
        turns=turns if isinstance(turns, int) and not isinstance(turns, bool) else None,
        cost_estimated=extra.get("cost_estimated") is True,
        price_table=str(extra.get("price_table") or ""),
    )


def _read_step(raw: Any, where: str) -> Step:
    s = _obj(raw, where)
    calls = tuple(
        ToolCall(
            call_id=str(_obj(c, f"{where}.tool_calls[{i}]").get("tool_call_id") or ""),
            name=str(c.get("function_name") or ""),
            arguments=dict(_obj(c.get("arguments") or {}, f"{where}.tool_calls[{i}].arguments")),
        )
        for i, c in enumerate(s.get("tool_calls") or [])
    )
    results = []
    observation = s.get("observation")
    if observation is not None:
        for i, r in enumerate(_obj(observation, f"{where}.observation").get("results") or []):
            r = _obj(r, f"{where}.observation.results[{i}]")
            extra = _extra(r)
            code, failed = extra.get("exit_code"), extra.get("failed")
            results.append(
                ToolResult(
                    call_id=_opt_str(r.get("source_call_id"), f"{where}.source_call_id"),
                    output=_text(r.get("content"), f"{where}.observation.results[{i}].content"),
                    exit_code=code
                    if isinstance(code, int) and not isinstance(code, bool)
                    else None,
                    failed=failed if isinstance(failed, bool) else None,
                )
            )
    return Step(
        source=str(s.get("source")),
        message=_text(s.get("message"), f"{where}.message"),
        timestamp=_opt_str(s.get("timestamp"), f"{where}.timestamp"),
        tool_calls=calls,
        results=tuple(results),
        usage=_usage_from(s.get("metrics"), "", f"{where}.metrics"),
        model=_opt_str(s.get("model_name"), f"{where}.model_name"),
        reasoning=_opt_str(s.get("reasoning_content"), f"{where}.reasoning_content"),
    )


def from_atif(data: Any) -> Trajectory:
    """The trajectory an ATIF document holds; :class:`ValueError` when it holds none."""
    doc = _obj(data, "trajectory")
    agent = _obj(doc.get("agent"), "agent")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise ValueError("steps: expected a list")
    extra = _extra(doc)
    notes = _opt_str(doc.get("notes"), "notes")
    version = _opt_str(agent.get("version"), "agent.version")
    try:
        return Trajectory(
            agent=str(agent.get("name") or ""),
            steps=tuple(_read_step(s, f"steps[{i}]") for i, s in enumerate(steps)),
            agent_version=None if version == UNKNOWN_VERSION else version,
            model=_opt_str(agent.get("model_name"), "agent.model_name"),
            session_id=_opt_str(doc.get("session_id"), "session_id"),
            workspace=_opt_str(extra.get("workspace"), "extra.workspace"),
            notes=tuple(notes.splitlines()) if notes else (),
            usage=_usage_from(doc.get("final_metrics"), "total_", "final_metrics"),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(str(exc)) from exc
