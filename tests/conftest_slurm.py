"""Fixtures for tests on the real Slurm (imported by test modules, as conftest_realgym is):

    from conftest_slurm import slurm_rig, slurm_gym  # noqa: F401

`slurm_rig`: a started single-host Slurm with accounting (tests/slurmrig.py), one per session,
holding /tmp/realslurm.lock. `slurm_gym`: real nemo-gym 0.7.0 submissions on it, holding
/tmp/realgym.lock for the module (taken after the Slurm lock: never ask for `realgym_lock` in the
same test, `slurm_gym` already holds it). Both fail, never skip, when something is not installed:
`make test` installs everything (.ci/install_slurm.sh, .ci/install_gym.sh 0.7.0).

    def test_watch_a_cluster_run(slurm_gym):
        sub = slurm_gym.submit("ok")                          # the base config, as it is
        sub.wait(lambda s: "RUNNING" in s.states().values(), 120, "the job to run")
        ... watch sub.run_dir (gym-job.json, <benchmark>/slurm-<id>.out, logs/) with gymwatch ...
        sub.wait_done()
    slurm_gym.submit("dies", {"services": {"policy": {"extra_args": "--stub-mode die"}}})
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest

from slurmgym import GymMissing, Submission, Workspace, gym_lock
from slurmrig import RigError, SlurmRig, running_rig

# One rig per test process. Each module that imports `slurm_rig` gets a fixture of its own (pytest
# keys fixtures by where they are defined), so a second module's session fixture would wait
# forever for the lock the first one holds: they share this one, stopped when the last lets go.
_shared: dict = {"rig": None, "stack": None, "users": 0}


@contextlib.contextmanager
def _shared_rig() -> Iterator[SlurmRig]:
    if _shared["users"] == 0:
        stack = contextlib.ExitStack()
        _shared["rig"] = stack.enter_context(running_rig(accounting=True))
        _shared["stack"] = stack
        print(f"slurmrig: a Slurm with accounting up in {_shared['rig'].start_seconds:.1f}s")
    _shared["users"] += 1
    try:
        yield _shared["rig"]
    finally:
        _shared["users"] -= 1
        if _shared["users"] == 0:
            stack, _shared["rig"], _shared["stack"] = _shared["stack"], None, None
            stack.close()


@pytest.fixture(scope="session")
def slurm_rig() -> Iterator[SlurmRig]:
    """A real Slurm (munged, slurmctld, slurmd, MariaDB, slurmdbd) for the session; the stand-in
    vllm and the fakepyxis plugin in place. Stopped, by pid, when the session ends."""
    try:
        with _shared_rig() as rig:
            yield rig
    except RigError as exc:
        pytest.fail(f"the test Slurm: {exc}", pytrace=False)


class SlurmGym:
    """Submit `gym eval submit` configs to the rig and watch them (the hook for gymwatch's tests)."""

    def __init__(self, rig: SlurmRig, ws: Workspace):
        self.rig, self.ws = rig, ws
        self.submissions: list[Submission] = []

    @property
    def env(self) -> dict:
        """An environment that reaches the rig and the Gym (for `gymwatch` run as a child)."""
        return self.ws.env(self.rig)

    def config(self, name: str, patch: dict | None = None) -> Path:
        """The base config (tests/slurm_configs/local-mcqa.yaml) with `patch` merged in."""
        return self.ws.config(name, patch)

    def submit(self, name: str, patch: dict | None = None, overrides: tuple[str, ...] = (),
               config: Path | None = None, meta: Path | None = None) -> Submission:
        """Run `gym eval submit` for configs/<name>.yaml (or `config`): returns the started
        Submission; `.wait_done()` waits until every job ended."""
        sub = Submission(self.rig, self.ws, config or self.config(name, patch), overrides, meta=meta).start()
        self.submissions.append(sub)
        return sub

    def cancel_all(self) -> None:
        """scancel whatever this module's submissions left queued or running, and wait for it."""
        for sub in self.submissions:
            if sub.proc is not None and sub.proc.poll() is None:
                sub.proc.wait(timeout=120)
            sub.poll()
            live = [j for j, s in sub.states().items() if s not in ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED")]
            if live:
                self.rig.run("scancel", *live, check=False)
                sub.wait(lambda s: not any(st in ("PENDING", "RUNNING", "COMPLETING") for st in s.states().values()),
                         60, "the cancelled jobs to end")


@pytest.fixture(scope="module")
def slurm_gym(slurm_rig, tmp_path_factory) -> Iterator[SlurmGym]:
    with gym_lock():
        ws = Workspace(tmp_path_factory.mktemp("slurmgym"))
        try:
            ws.prepare()
        except GymMissing as exc:
            pytest.fail(f"{exc}; these tests must not be skipped", pytrace=False)
        gym = SlurmGym(slurm_rig, ws)
        try:
            yield gym
        finally:
            gym.cancel_all()
            ws.cleanup()
