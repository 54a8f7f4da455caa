"""The test Slurm's stand-ins, without a Slurm: the `vllm` the cluster tests' jobs run (each of its
modes), and the recorder's case table (each case a config Gym's schema takes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from slurmrig import STANDIN_BIN

VLLM = STANDIN_BIN / "vllm"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, data: bytes | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def serve():
    procs = []

    def start(*flags: str) -> str:
        port = _free_port()
        p = subprocess.Popen([sys.executable, str(VLLM), "serve", "stub-model", "--port", str(port),
                              "--tensor-parallel-size", "1", *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        procs.append(p)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return f"http://127.0.0.1:{port}"
            assert p.poll() is None, p.stdout.read()
            time.sleep(0.05)
        raise AssertionError("the stand-in never listened")
    yield start
    for p in procs:
        p.kill()
        p.wait()


def test_standin_vllm_serves_models_and_answers_chat_and_responses(serve):
    url = serve()
    assert _get(f"{url}/v1/models") == (200, {"object": "list", "data": [
        {"id": "stub-model", "object": "model", "created": 0, "owned_by": "vllm", "max_model_len": 4096}]})
    code, chat = _get(f"{url}/v1/chat/completions", b'{"messages": []}')
    assert code == 200 and chat["choices"][0]["message"]["content"] == "The answer is \\boxed{B}"
    code, resp = _get(f"{url}/v1/responses", b'{"input": "q"}')
    assert code == 200 and resp["output"][0]["content"][0]["text"] == "The answer is \\boxed{B}"
    assert resp["usage"]["input_tokens"] > 0


def test_standin_vllm_fails_after_n_answers(serve):
    url = serve("--stub-mode", "fail", "--stub-fail-after", "2")
    codes = [_get(f"{url}/v1/responses", b"{}")[0] for _ in range(4)]
    assert codes == [200, 200, 500, 500]
    assert _get(f"{url}/v1/models")[0] == 200          # healthy all along: the job's health loop passes


def test_standin_vllm_never_healthy(serve):
    url = serve("--stub-mode", "unhealthy")
    assert _get(f"{url}/v1/models")[0] == 503


def test_standin_vllm_dies_during_startup_with_a_traceback():
    proc = subprocess.run([sys.executable, str(VLLM), "serve", "m", "--port", str(_free_port()),
                           "--stub-mode", "die"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr and "told to die during startup" in proc.stderr


def test_standin_vllm_hang_never_listens():
    port = _free_port()
    p = subprocess.Popen([sys.executable, str(VLLM), "serve", "m", "--port", str(port), "--stub-mode", "hang"],
                         stdout=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        assert p.poll() is None
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
    finally:
        p.kill()
        p.wait()


def test_standin_vllm_mode_from_the_environment():
    proc = subprocess.run([sys.executable, str(VLLM), "serve", "m", "--port", str(_free_port())],
                          capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "GYMWATCH_VLLM_STUB_MODE": "die"})
    assert proc.returncode == 1 and "mode=die" in proc.stdout


def test_every_recorder_case_is_a_config_gym_takes(tmp_path):
    """Each case of scripts/record_submission.py, merged over the base config, passes Gym 0.7.0's
    own validation (`gym eval submit --dry-run` renders the job scripts without submitting)."""
    from slurmgym import GymMissing, Workspace

    sys.path.insert(0, str(STANDIN_BIN.parents[1] / "scripts"))
    import record_submission as rec

    ws = Workspace(tmp_path / "ws")
    try:
        ws.prepare()
    except GymMissing as exc:
        pytest.fail(f"{exc}; this test must not be skipped", pytrace=False)
    want = {"pending_cancelled": "#SBATCH --begin=now+1hour", "sbatch_refused": "#SBATCH --partition=nosuch",
            "timeout_resumed": "Auto-resume follow-up queued", "svc_dies_at_startup": "--stub-mode die",
            "driver_aborts": "--stub-mode fail --stub-fail-after 4", "two_benchmarks_one_waits": "mcqa_again",
            "completed": "vllm serve stub-model --port 29861"}
    assert set(want) == set(rec.CASES)
    for name, case in rec.CASES.items():
        cfg = ws.config(name, rec._fill_benchmarks(ws, json.loads(json.dumps(case.patch))))
        proc = subprocess.run([str(ws.venv / "bin" / "gym"), "eval", "submit", "-c", str(cfg), "--dry-run"],
                              capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        assert want[name] in proc.stdout, name
    ws.cleanup()


def test_gym_lock_is_reentrant_here_and_exclusive_elsewhere(tmp_path):
    """`slurm_gym` and `realgym_lock` both hold /tmp/realgym.lock: nested in one process they must
    not wait for each other, and meanwhile no other process gets it (a lock file of the test's own)."""
    from slurmgym import gym_lock

    lock = tmp_path / "realgym.lock"

    def other_gets_it() -> bool:
        return subprocess.run(["flock", "-n", str(lock), "true"], timeout=30).returncode == 0

    with gym_lock(lock):
        with gym_lock(lock):
            assert not other_gets_it()
        assert not other_gets_it()
    assert other_gets_it()


def test_standin_vllm_reads_its_reply_delay_from_a_file_at_each_request(serve, tmp_path):
    delay = tmp_path / "delay"
    delay.write_text("1.5")
    url = serve("--stub-reply-delay-file", str(delay))
    body = json.dumps({"model": "stub-model", "messages": [{"role": "user", "content": "?"}]}).encode()
    t0 = time.monotonic()
    assert _get(f"{url}/v1/chat/completions", body)[0] == 200
    slow = time.monotonic() - t0
    delay.write_text("0")
    t0 = time.monotonic()
    assert _get(f"{url}/v1/chat/completions", body)[0] == 200
    assert slow >= 1.5 > time.monotonic() - t0
