"""A benchmark's job.sh read into directives, service steps and the driver (gymwatch/core/cluster/jobscript.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gymwatch.core.cluster import jobscript
from gymwatch.core.cluster.jobscript import expand, parse

FIXTURES = Path(__file__).parent / "fixtures"
SLURM = FIXTURES / "gym-0.7.0-slurm"
RENDERED = FIXTURES / "gym-0.7.0-jobscripts"


def recorded(case: str) -> jobscript.JobScript:
    return jobscript.read(next((SLURM / case).glob("gym-job-*")) / "mcqa" / "job.sh")


def test_a_recorded_job_script():
    js = recorded("real_mcqa_cold")
    assert (js.job_name, js.account, js.partition, js.nodes) == ("gym-mcqa", "gymwatch", "debug", "1")
    assert js.time_limit == 45 * 60 and js.batch_log == "slurm-%j.out" and not js.resumable
    [policy] = js.services
    assert (policy.name, policy.port, policy.output) == ("policy", 18601, "logs/policy-$SLURM_JOB_ID.log")
    assert policy.command.startswith("vllm serve stub-model --port 18601")
    assert policy.health is not None
    assert (policy.health.url, policy.health.path) == ("http://localhost:18601/v1/models", "/v1/models")
    assert (policy.health.attempts, policy.health.interval, policy.health.patience) == (12, 5, 60)
    assert js.driver is not None and js.driver.output == "logs/driver-$SLURM_JOB_ID.log"
    assert js.driver.rollouts.endswith("/mcqa/artifacts/rollouts.jsonl")
    assert js.driver.command.startswith("gym eval run +output_jsonl_fpath=")


def test_the_script_holds_secrets_and_the_commands_kept_do_not():
    js = recorded("real_mcqa_cold")
    assert js.driver is not None
    assert "+policy_api_key=<redacted>" in js.driver.command and "dummy" not in js.driver.command
    rendered = jobscript.read(RENDERED / "one_node_plain.sh")
    assert all("hf_secret_value" not in s.command for s in rendered.services)


def test_begin_and_the_health_loop_of_fewer_attempts():
    assert recorded("pending_begintime_cancelled").begin == "now+1hour"
    health = recorded("svc_never_healthy_timeout").services[0].health
    assert health is not None and (health.path, health.attempts) == ("/health", 2)


def test_a_resumable_job_script_says_its_retry_limit():
    js = recorded("resumable_chain_svc_dies_with_sacct")
    assert js.resumable and js.max_retries == 2 and js.max_walltime is None
    assert js.time_limit == 20 * 60


def test_gym_s_multi_node_script_with_the_collector_and_a_resume_cap():
    js = jobscript.read(RENDERED / "multinode_otel_resumable.sh")
    assert (js.nodes, js.partition, js.directive("gpus-per-node"), js.dependency) == ("2", "batch", "8", "afterok:100")
    assert js.time_limit == 4 * 3600 and js.resumable and js.max_retries == 3 and js.max_walltime == 48 * 3600
    by_name = {s.name: s for s in js.services}
    assert list(by_name) == ["otel_collector", "policy", "judge"]
    collector = by_name["otel_collector"]
    assert collector.port == 13133 and collector.health is not None and collector.health.path == "/"
    assert collector.health.attempts == 60
    # A multi-line `bash -lc '...'` command (Ray symmetric-run) is one line here, and ends at its `&`.
    policy = by_name["policy"]
    assert policy.output == "logs/policy-$SLURM_JOB_ID.log" and policy.port == 8000
    assert "\n" not in policy.command and "vllm serve org/model" in policy.command
    assert policy.health is not None and policy.health.attempts == 360
    assert by_name["judge"].health is not None and by_name["judge"].health.path == "/health"
    # The driver: a `bash -c` entrypoint that installs Gym, then runs the GYM_CMD array.
    assert js.driver is not None and js.driver.output == "logs/driver-$SLURM_JOB_ID.log"
    assert js.driver.command.startswith("gym eval run ") and "+resume_from_cache=True" in js.driver.command
    assert js.driver.rollouts == "/lustre/u/runs/gym-job-20261207T100000Z-abcdef/aime/artifacts/rollouts.jsonl"


def test_gym_s_one_node_script_with_a_pre_command():
    js = jobscript.read(RENDERED / "one_node_plain.sh")
    assert not js.resumable and [s.name for s in js.services] == ["policy", "judge"]
    assert js.services[0].command.startswith("bash -c export X=1 exec vllm serve org/model")


def test_directives_in_every_spelling_and_a_trailing_comment():
    js = parse("#!/bin/bash\n#SBATCH -t 1-02:00:00\n#SBATCH --partition=gpu  # pool: main\n"
               "#SBATCH -J myjob\n#SBATCH --output slurm/%x-%j.out\n# a comment\n#SBATCH -N2\n"
               "echo hi\n#SBATCH --time=00:01:00\n")
    assert js.time_limit == 86400 + 7200            # the directive after the first command is not sbatch's
    assert (js.partition, js.job_name, js.nodes, js.batch_log) == ("gpu", "myjob", "2", "slurm/%x-%j.out")


def test_a_service_without_a_health_loop_and_an_older_gym_s_probe_of_two_urls():
    text = ("#!/bin/bash\n# service: ray\nsrun --overlap --output=logs/ray.log ray start --head --port 6379 &\n"
            "RAY_PID=$!\n\n# service: policy\nsrun --overlap --output=logs/policy.log vllm serve m --port 8000 &\n"
            "POLICY_PID=$!\n"
            'echo "Waiting for policy at http://localhost:8000..."\nfor _i in $(seq 1 120); do\n'
            '    if curl -sf "http://localhost:8000/health" > /dev/null 2>&1 || '
            'curl -sf "http://localhost:8000/openapi.json" > /dev/null 2>&1; then\n'
            '        echo "  policy ready."\n        break\n    fi\n    sleep 5\ndone\n'
            "srun --overlap --output=logs/driver.log gym eval run +output_jsonl_fpath=out/rollouts.jsonl\n")
    js = parse(text)
    ray, policy = js.services
    assert ray.health is None and ray.port == 6379
    assert policy.health is not None and policy.health.urls == ("http://localhost:8000/health",
                                                                "http://localhost:8000/openapi.json")
    assert js.driver is not None and (js.driver.output, js.driver.rollouts) == ("logs/driver.log", "out/rollouts.jsonl")


@pytest.mark.parametrize("template, want", [
    ("logs/policy-$SLURM_JOB_ID.log", "logs/policy-17.log"),
    ("logs/policy-${SLURM_JOB_ID}.log", "logs/policy-17.log"),
    ("slurm-%j.out", "slurm-17.out"),
    ("%x-%j.out", "gym-mcqa-17.out"),
    ("logs/driver.log", "logs/driver.log"),
    ("100%%-%j", "100%-17"),
])
def test_a_log_name_for_one_job(template, want):
    assert expand(template, "17", "gym-mcqa") == want


def test_an_unreadable_job_script_is_empty_with_a_note(tmp_path):
    js = jobscript.read(tmp_path / "job.sh")
    assert js.services == () and js.driver is None and "cannot read it" in js.notes[0]


def test_a_script_that_is_not_gym_s_gives_nothing_rather_than_an_error():
    js = parse("#!/bin/bash\necho 'unbalanced\nsrun\n# service:\n")
    assert js.services == () and js.time_limit is None


def test_the_driver_s_step_number_counts_the_sruns_before_it():
    # Slurm numbers steps as they start; Gym starts the driver after every service's srun.
    assert recorded("real_mcqa_cold").driver.step == 1
    assert jobscript.read(RENDERED / "one_node_plain.sh").driver.step == 2
    # the collector, a policy under `env K=V` (a value with spaces, quoted), a judge: step 3
    assert jobscript.read(RENDERED / "multinode_otel_resumable.sh").driver.step == 3
    quoted = parse("#!/bin/bash\n# service: policy\nenv A='x y' srun --output=logs/policy.log vllm serve m &\n"
                   "POLICY_PID=$!\nsrun --output=logs/driver.log gym eval run\n")
    assert quoted.driver is not None and quoted.driver.step == 1
