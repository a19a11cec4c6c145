"""The harbor evaluator in a real (bubblewrap) environment with Harbor's absolute paths.

The environment here is :class:`harbor_helpers.BwrapHandle`: a private root
directory where ``/tests``, ``/logs/verifier``, ``/solution`` and ``/app``
exist for real, so the task scripts are written exactly as Harbor tasks write them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harbor_helpers import BwrapHandle, have_bwrap, make_task
from ksi_harbor.evaluator import HarborEvaluator
from ksi_harbor.source import HarborTaskSource

from ksi.models import TaskSpec

pytestmark = pytest.mark.skipif(not have_bwrap(), reason="needs bubblewrap (bwrap)")


@pytest.fixture
def env(tmp_path: Path) -> BwrapHandle:
    workspace = tmp_path / "workspace"
    (workspace / "repo").mkdir(parents=True)
    return BwrapHandle(tmp_path / "container", workspace)


def load(task_dir: Path) -> TaskSpec:
    [task] = HarborTaskSource().load(task_dir)
    return task


def grade(task: TaskSpec, env: BwrapHandle, tmp_path: Path, **options: float):
    return HarborEvaluator(**options).grade(
        task, env.host_workspace / "repo", env=env, log_dir=tmp_path / "eval"
    )


def test_oracle_solution_then_verifier_scores_one(env: BwrapHandle, tmp_path: Path) -> None:
    task = load(make_task(tmp_path / "tasks"))
    ran = env.run_shell(task.metadata["solution"]["command"], tmp_path, cwd="/workspace/repo")
    assert ran.exit_code == 0, (tmp_path / "err.txt").read_text()
    assert (env.root / "app" / "hello.txt").read_text() == "Hello, world!"
    result = grade(task, env, tmp_path)
    assert (result.status, result.native_score, result.resolved) == ("scored", 1.0, True)
    assert result.details["score_from"] == "reward.txt"
    assert (tmp_path / "eval" / "verifier" / "reward.txt").read_text().strip() == "1"


def test_untouched_container_scores_zero(env: BwrapHandle, tmp_path: Path) -> None:
    result = grade(load(make_task(tmp_path / "tasks")), env, tmp_path)
    assert (result.status, result.native_score) == ("scored", 0.0)


def test_tests_appear_only_at_grading_and_planted_rewards_are_wiped(
    env: BwrapHandle, tmp_path: Path
) -> None:
    task = load(make_task(tmp_path / "tasks"))
    # An agent that tries to cheat: a reward of 1 and a fake test.sh that does nothing.
    env.run_shell(
        "mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt "
        "&& echo true > /tests/test.sh",
        tmp_path,
    )
    result = grade(task, env, tmp_path)
    assert result.native_score == 0.0
    assert (env.root / "tests" / "test.sh").read_text().startswith("#!/bin/bash\nmkdir -p")


def test_reward_json_with_a_reward_key(env: BwrapHandle, tmp_path: Path) -> None:
    script = (
        "mkdir -p /logs/verifier\n"
        'echo \'{"reward": 0.75, "style": 0.5, "tests_passed": 1}\' > /logs/verifier/reward.json\n'
    )
    result = grade(load(make_task(tmp_path / "tasks", test_sh=script)), env, tmp_path)
    assert (result.status, result.native_score) == ("scored", 0.75)
    assert result.details["rewards"] == {"reward": 0.75, "style": 0.5, "tests_passed": 1.0}
    assert result.details["score_from"] == "reward.json:reward"


@pytest.mark.parametrize(
    ("rewards", "score", "source"),
    [({"accuracy": 0.4}, 0.4, "accuracy"), ({"a": 1, "b": 0.5}, 0.75, "mean")],
)
def test_reward_json_without_a_reward_key(
    env: BwrapHandle, tmp_path: Path, rewards: dict[str, float], score: float, source: str
) -> None:
    script = f"mkdir -p /logs/verifier\necho '{json.dumps(rewards)}' > /logs/verifier/reward.json\n"
    result = grade(load(make_task(tmp_path / "tasks", test_sh=script)), env, tmp_path)
    assert result.native_score == pytest.approx(score)
    assert result.details["score_from"] == f"reward.json:{source}"
    assert result.details["rewards"] == {k: float(v) for k, v in rewards.items()}


def test_reward_txt_wins_over_reward_json_and_both_are_kept(
    env: BwrapHandle, tmp_path: Path
) -> None:
    script = (
        "mkdir -p /logs/verifier\necho 0.5 > /logs/verifier/reward.txt\n"
        "echo '{\"reward\": 1}' > /logs/verifier/reward.json\n"
    )
    result = grade(load(make_task(tmp_path / "tasks", test_sh=script)), env, tmp_path)
    assert result.native_score == 0.5
    assert result.details["rewards"] == {"reward": 1.0}
    assert any("reward.txt gives the score" in n for n in result.notes)


def test_no_reward_file_is_unscored(env: BwrapHandle, tmp_path: Path) -> None:
    script = "echo checking; exit 1\n"
    result = grade(load(make_task(tmp_path / "tasks", test_sh=script)), env, tmp_path)
    assert (result.status, result.native_score, result.exit_code) == ("no_reward", None, 1)
    assert "checking" in result.stdout_tail
    assert "reward.txt" in result.notes[0]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo banana > /logs/verifier/reward.txt", "reward.txt: expected one number"),
        ("echo 1.5 > /logs/verifier/reward.txt", "reward.txt: 1.5 is outside [0, 1]"),
        ("echo '[1]' > /logs/verifier/reward.json", "reward.json: expected a non-empty object"),
        ('echo \'{"reward": "1"}\' > /logs/verifier/reward.json', "'reward': expected a number"),
        ("echo '{oops' > /logs/verifier/reward.json", "reward.json: not valid JSON"),
    ],
)
def test_bad_reward_is_unscored_with_the_reason(
    env: BwrapHandle, tmp_path: Path, script: str, message: str
) -> None:
    test_sh = f"mkdir -p /logs/verifier\n{script}\n"
    result = grade(load(make_task(tmp_path / "tasks", test_sh=test_sh)), env, tmp_path)
    assert (result.status, result.native_score) == ("bad_reward", None)
    assert message in result.notes[0]


def test_verifier_timeout_is_unscored(env: BwrapHandle, tmp_path: Path) -> None:
    script = "echo 1 > /logs/verifier/reward.txt\nsleep 30\n"
    task = load(make_task(tmp_path / "tasks", test_sh=script))
    result = grade(task, env, tmp_path, timeout_sec=0.5)
    assert (result.status, result.native_score) == ("timeout", None)
    assert "0.5s" in result.notes[0]


def test_verifier_env_and_working_directory(env: BwrapHandle, tmp_path: Path) -> None:
    toml = '[verifier]\ntimeout_sec = 30\nenv = { EXPECTED = "/app" }\n'
    script = '[ "$PWD" = "$EXPECTED" ] && echo 1 > /logs/verifier/reward.txt\n'
    result = grade(load(make_task(tmp_path / "tasks", toml=toml, test_sh=script)), env, tmp_path)
    assert result.native_score == 1.0
    assert result.eval_workdir == "/app"


def test_without_an_environment_it_says_so() -> None:
    task = TaskSpec("t", metadata={"harbor": {"tests_dir": "/nowhere"}})
    result = HarborEvaluator().grade(task, Path("/nowhere"))
    assert (result.status, result.native_score) == ("no_environment", None)


def test_a_task_from_another_source_is_not_graded(env: BwrapHandle, tmp_path: Path) -> None:
    task = TaskSpec("t", metadata={"task_source": "custom", "eval_command": "true"})
    result = HarborEvaluator().grade(task, tmp_path, env=env)
    assert (result.status, result.native_score) == ("no_tests", None)
    assert env.execs == []


def test_binary_and_nested_solution_files_reach_solution(env: BwrapHandle, tmp_path: Path) -> None:
    solve = (
        "#!/bin/bash\ncmp /solution/data/blob.bin /solution/data/copy.bin "
        "&& cp /solution/greeting.txt hello.txt\n"
    )
    task_dir = make_task(tmp_path / "tasks", solve_sh=solve)
    blob = bytes(range(256)) * 4
    for name in ("blob.bin", "copy.bin"):
        (task_dir / "solution" / "data").mkdir(exist_ok=True)
        (task_dir / "solution" / "data" / name).write_bytes(blob)
    task = load(task_dir)
    ran = env.run_shell(task.metadata["solution"]["command"], tmp_path, cwd="/workspace/repo")
    assert ran.exit_code == 0, (tmp_path / "err.txt").read_text()
    assert (env.root / "solution" / "data" / "blob.bin").read_bytes() == blob
    assert grade(task, env, tmp_path).native_score == 1.0


# test.sh runs the agent's program, as verifiers do; here the program is hostile.
RUNS_AGENT_CODE = """\
#!/bin/bash
mkdir -p /logs/verifier
if sh /app/solution.sh; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def host_reward(tmp_path: Path) -> Path:
    """A host file holding ``1`` and a secret: what a link out of the copied logs would read."""
    path = tmp_path / "host" / "reward"
    path.parent.mkdir()
    path.write_text("1\nhost-secret-c0ffee\n")
    return path


def test_a_reward_linked_to_a_host_file_is_no_reward(env: BwrapHandle, tmp_path: Path) -> None:
    host = host_reward(tmp_path)
    task = load(make_task(tmp_path / "tasks", test_sh=RUNS_AGENT_CODE))
    # The agent's program: make the reward a link to a host path, then fail.
    plant = f"ln -sf {host} /logs/verifier/reward.txt; rm -f {host.parent}/*; exit 1"
    (env.root / "app" / "solution.sh").write_text(plant + "\n")
    result = grade(task, env, tmp_path)
    assert (result.status, result.native_score) == ("no_reward", None), result
    assert "host-secret" not in json.dumps(result.as_dict())
    copied = tmp_path / "eval" / "verifier"
    assert not (copied / "reward.txt").is_symlink() and not (copied / "reward.txt").exists()
    assert any(
        "deleted from the copied verifier logs" in n and "reward.txt" in n for n in result.notes
    )
    assert host.read_text().startswith("1")  # the host file itself is untouched


def test_a_verifier_directory_linked_to_a_host_directory_is_not_read(
    env: BwrapHandle, tmp_path: Path
) -> None:
    host = host_reward(tmp_path)
    (host.parent / "reward.txt").write_text("1\n")
    task = load(make_task(tmp_path / "tasks", test_sh=RUNS_AGENT_CODE))
    plant = f"rm -rf /logs/verifier; ln -s {host.parent} /logs/verifier; exit 1"
    (env.root / "app" / "solution.sh").write_text(plant + "\n")
    result = grade(task, env, tmp_path)
    assert result.native_score is None and result.status == "no_reward", result
    assert not (tmp_path / "eval" / "verifier").is_symlink()
    assert (host.parent / "reward.txt").read_text() == "1\n"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "python3 -c \"open('/logs/verifier/reward.json','w').write('['*30000+']'*30000)\"",
            "too deep",
        ),
        ("head -c 200000 /dev/zero | tr '\\\\0' 1 > /logs/verifier/reward.txt", "too large"),
    ],
)
def test_a_reward_too_deep_or_too_large_is_a_bad_reward(
    env: BwrapHandle, tmp_path: Path, script: str, message: str
) -> None:
    test_sh = f"mkdir -p /logs/verifier\n{script}\n"
    result = grade(load(make_task(tmp_path / "tasks", test_sh=test_sh)), env, tmp_path)
    assert (result.status, result.native_score) == ("bad_reward", None), result
    assert message in result.notes[0]
