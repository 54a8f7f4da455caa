"""How `gymwatch run` turns its command into gym command lines (no processes started)."""

from pathlib import Path

import pytest

from gymwatch.launch.plan import PlanError, head_of, make_plan, split_command

RUN = Path("/runs/r1")


def plan(*tokens):
    return make_plan(list(tokens), RUN, Path("/work"), ["/venv/bin/gym"])


def test_env_then_eval_adds_hydra_dirs_output_and_no_serve():
    p = plan("--", "env", "start", "--resources-server", "mcqa", "++policy_api_key=sk-1",
             "--then", "eval", "run", "--agent", "a", "--input", "in.jsonl")
    assert p.mode == "env+eval"
    env, ev = p.argv("env"), p.argv("eval")
    assert env[:3] == ["/venv/bin/gym", "env", "start"]
    assert "hydra.run.dir=/runs/r1/hydra/env_start" in env
    assert ev[1:4] == ["eval", "run", "--no-serve"]
    assert "hydra.run.dir=/runs/r1/hydra/eval_run" in ev
    assert ev[-2:] == ["--output", "/runs/r1/rollouts.jsonl"]
    assert p.output == RUN / "rollouts.jsonl"
    assert not any("nemo_gym_log_dir" in a for a in env + ev)


def test_given_output_hydra_dir_and_log_dir_are_kept():
    p = plan("gym", "env", "start", "hydra.run.dir=/h", "+nemo_gym_log_dir=logs",
             "--then", "gym", "eval", "run", "--no-serve", "--output=out/r.jsonl")
    env, ev = p.argv("env"), p.argv("eval")
    assert [a for a in env if a.startswith("hydra.run.dir")] == ["hydra.run.dir=/h"]
    assert ev.count("--no-serve") == 1
    assert "--output" not in ev
    assert p.output == Path("/work/out/r.jsonl")
    assert p.logs_dir == Path("/work/logs")


def test_single_eval_run_is_one_process_that_serves():
    p = plan("eval", "run", "+split=validation", "--agent", "a")
    assert p.mode == "e2e" and p.env_args is None
    assert "--no-serve" not in p.argv("eval")


def test_env_only():
    p = plan("env", "start", "++head_server.host=127.0.0.2", "++head_server.port=12345")
    assert p.mode == "env" and p.output is None
    assert p.head == "127.0.0.2:12345"


@pytest.mark.parametrize("tokens", [[], ["eval", "start"], ["env", "start", "--then", "env", "start"],
                                    ["run", "x"]])
def test_bad_commands_are_one_line_errors(tokens):
    with pytest.raises(PlanError):
        split_command(tokens)


def test_head_default():
    assert head_of([]) == "127.0.0.1:11000"


# --- `gymwatch run -- eval submit ...`

from gymwatch.launch.plan import PlanUsage, SubmitPlan, submit_args  # noqa: E402


@pytest.mark.parametrize("tokens", [["--", "eval", "submit", "-c", "f.yaml", "+job.output_path=/o"],
                                    ["gym", "eval", "submit", "-c", "f.yaml", "+job.output_path=/o"],
                                    ["--", "/opt/venv/bin/ng", "eval", "submit", "-c", "f.yaml", "+job.output_path=/o"]])
def test_eval_submit_is_its_own_command(tokens):
    assert submit_args(tokens) == ["eval", "submit", "-c", "f.yaml", "+job.output_path=/o"]


@pytest.mark.parametrize("tokens", [["eval", "run", "--agent", "a"], ["env", "start", "--then", "eval", "run"], []])
def test_other_commands_are_no_submit(tokens):
    assert submit_args(tokens) is None


@pytest.mark.parametrize("tokens", [["eval", "submit", "-c", "f", "--then", "eval", "run"],
                                    ["env", "start", "--then", "eval", "submit", "-c", "f"]])
def test_eval_submit_joined_to_another_command_is_a_usage_error(tokens):
    with pytest.raises(PlanUsage, match="runs alone"):
        submit_args(tokens)


def test_gymwatch_adds_json_once_and_keeps_the_user_s_flags():
    def argv(*args):
        return SubmitPlan(gym=["/venv/bin/gym"], args=["eval", "submit", *args], cwd=Path("/w")).argv()
    assert argv("-c", "f.yaml", "compute.local.walltime=00:05:00") == [
        "/venv/bin/gym", "eval", "submit", "-c", "f.yaml", "compute.local.walltime=00:05:00", "--json"]
    assert argv("--json", "-c", "f.yaml").count("--json") == 1
    for flag in ("--dry-run", "--resolve-only"):
        p = SubmitPlan(gym=["g"], args=["eval", "submit", "-c", "f", flag], cwd=Path("/w"))
        assert p.pass_through and p.argv() == ["g", "eval", "submit", "-c", "f", flag]


def test_the_error_for_a_wrong_command_names_eval_submit_too():
    with pytest.raises(PlanUsage, match="or one `eval submit ...`"):
        split_command(["run", "x"])
