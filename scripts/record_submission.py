"""Record a real `gym eval submit` (nemo-gym 0.7.0) on the test Slurm, as seen from outside.

    python scripts/record_submission.py CASE [CASE ...]        the cases below, into --out
    python scripts/record_submission.py --name NAME -c CONFIG [-- OVERRIDES...]   any config

For each case: a fresh Slurm from tests/slurmrig.py (with accounting unless --no-accounting),
`gym eval submit -c CONFIG --json` run in it (Gym from GYMWATCH_GYM07_VENV, default
/tmp/gymwatch-gymvenv-0.7.0, as `.ci/install_gym.sh 0.7.0` installs it), then the jobs watched
until they end. Written to OUT/<case>/:
  <gym_job_id>/   the submission's run dir, copied with its layout (gym-job.json, resolved-config.yaml,
                  each benchmark's job.sh, slurm-<id>.out, logs/, artifacts/, model-calls/, chain files).
                  Gym writes absolute paths into these files: they are kept as they were
                  (see _meta/run_dir.txt for where the run dir was).
  _meta/          what was seen from outside: squeue_snapshots.log (one `squeue` call for all the
                  submission's jobs, written when a job's state, reason, node or dependency changed),
                  states.log (one line per job state change), scontrol/<id>-<n>-<STATE>.txt
                  (`scontrol show job -o` at each change) and <id>-final.txt, squeue_final.txt,
                  sacct.txt, files.log (the run dir's files appearing and growing: seconds since
                  submit, new|grow|shrink, size, path), actions.log (what the recorder did, e.g. scancel),
                  submit.argv/.stdout/.stderr/.exit, env.txt, config.yaml (what was submitted),
                  slurm.conf (the rig's), index.json (Gym's copy of the record under XDG_CACHE_HOME),
                  fakepyxis.log (the container flags each step was given), run_dir.txt and tree.txt
                  (where the run dir was, and every dir and file in it at the end: git keeps no
                  empty dir), case.json (the case and the times measured; files left out for size).

Locks: /tmp/realslurm.lock (the rig), then /tmp/realgym.lock around the Gym runs. With --in-rig the
caller holds both and has a rig up (its environment names it): this process takes neither.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from slurmgym import Submission, Workspace, gym_lock  # noqa: E402
from slurmrig import SlurmRig, running_rig  # noqa: E402

DEFAULT_OUT = REPO / "tests" / "fixtures" / "gym-0.7.0-slurm-recorded"
DEFAULT_WORK = Path("/tmp/gymwatch-slurmrec")
STUB = ("services", "policy", "extra_args")


def cancel_pending_after(seconds: float) -> Callable[[Submission], None]:
    """scancel the submission's jobs once one has been PENDING for `seconds` (what `stop` does)."""
    def hook(sub: Submission) -> None:
        pending = [j for j, f in sub.jobs.items() if f["STATE"] == "PENDING"]
        if pending and not sub.actions and sub.now() - sub.first_seen[f"{pending[0]} PENDING"] >= seconds:
            sub.act("cancel the pending job", "scancel", *pending)
    return hook


@dataclass
class Case:
    about: str
    patch: dict = field(default_factory=dict)
    overrides: tuple[str, ...] = ()
    on_poll: Callable[[Submission], None] | None = None
    timeout: float = 900
    config: Path | None = None        # a config of the user's own, submitted as it is


def _stub(flags: str) -> dict:
    return {"services": {"policy": {"extra_args": flags}}}


CASES: dict[str, Case] = {
    "completed": Case("a run that completes: the policy service becomes ready, the driver collects 10 "
                      "rollouts, the job ends COMPLETED (its service step cancelled, as every job ends)"),
    "svc_dies_at_startup": Case(
        "the policy service (the stand-in vllm) exits 1 with a traceback 3 s into its startup: the "
        "health loop says it died, the job FAILED, the driver never ran",
        _stub("--stub-mode die --stub-startup-delay 3")),
    "pending_cancelled": Case(
        "a job held PENDING (reason BeginTime: `begin` in compute.extra_args, an hour ahead), "
        "then cancelled with scancel after 10 s: no slurm-<id>.out, no logs",
        {"compute": {"local": {"extra_args": {"begin": "now+1hour"}}}}, on_poll=cancel_pending_after(10)),
    "timeout_resumed": Case(
        "a resumable chain: walltime 2 min and a slow model (25 s per answer) make the first link hit "
        "its time limit (TIMEOUT) part-way through; each next link says so and resumes, skipping the "
        "rollouts already written, until one COMPLETES (how many time out first depends on the "
        "machine's speed); that link's successor is then cancelled (DependencyNeverSatisfied)",
        {"compute": {"local": {"walltime": "00:02:00"}},
         "driver": {"benchmarks": {"mcqa": {"resumable": {"max_retries": 2}}}},
         **_stub("--stub-reply-delay 25")}, timeout=1200),
    "driver_aborts": Case(
        "the policy answers its first 4 requests, then HTTP 500 to every one: `gym eval run` in the "
        "driver step aborts, the job FAILED with a few rollouts written",
        _stub("--stub-mode fail --stub-fail-after 4")),
    "two_benchmarks_one_waits": Case(
        "two benchmarks in one submission, two jobs each asking for both CPUs of the node "
        "(cpus-per-task=2): one runs while the other is PENDING (Resources), then it runs",
        {"compute": {"local": {"extra_args": {"cpus-per-task": "2"}}},
         "driver": {"benchmarks": {"mcqa_again": {"run": {}}}}}, timeout=1200),
    "sbatch_refused": Case(
        "a node pool naming a partition the cluster does not have: sbatch refuses the job, the "
        "record has job_id null and sbatch's error, nothing runs",
        {"compute": {"local": {"node_pools": {"main": {"partition": "nosuch"}}}}}, timeout=120),
}


def _fill_benchmarks(ws: Workspace, patch: dict) -> dict:
    """A benchmark a case adds with an empty `run` gets mcqa's run settings."""
    base_run = ws.base_config()["driver"]["benchmarks"]["mcqa"]["run"]
    benches = patch.get("driver", {}).get("benchmarks", {})
    for bench in benches.values():
        if bench.get("run") == {}:
            bench["run"] = dict(base_run)
    return patch


def record(rig: SlurmRig, ws: Workspace, name: str, case: Case, out: Path) -> dict:
    """Submit, watch until every job ended, write OUT/<name>/ (replacing an older recording)."""
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    meta = dest / "_meta"
    meta.mkdir(parents=True)
    runs = ws.root / "runs" / name
    if runs.exists():
        shutil.rmtree(runs)
    if case.config:
        config = ws.root / "configs" / f"{name}.yaml"
        shutil.copyfile(case.config, config)
    else:
        config = ws.config(name, _fill_benchmarks(ws, json.loads(json.dumps(case.patch))))
    sub = Submission(rig, ws, config, case.overrides, meta=meta).start()
    sub.wait_done(timeout=case.timeout, on_poll=case.on_poll)
    took = sub.now()
    sub.finish()
    left_out = sub.copy_run(dest) if sub.run_dir else []
    info = {"case": name, "about": case.about, "patch": case.patch, "overrides": list(case.overrides),
            "seconds": {"submission": round(took, 1)}, "jobs": sub.history,
            "left_out_for_size": left_out}
    (meta / "case.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help=f"cases to record: {', '.join(CASES)} (or `all`)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="configs, data and run dirs (default %(default)s)")
    ap.add_argument("--name", help="record -c CONFIG under this name")
    ap.add_argument("-c", "--config", type=Path, help="a `gym eval submit` config of your own")
    ap.add_argument("--no-accounting", action="store_true", help="no slurmdbd: sacct fails, as without accounting")
    ap.add_argument("--in-rig", action="store_true", help="a parent holds the locks and runs the rig")
    ap.epilog = "Overrides for `gym eval submit` go after `--`."
    cut = argv.index("--") if "--" in argv else len(argv)
    args, overrides = ap.parse_args(argv[:cut]), tuple(argv[cut + 1:])
    if args.config:
        if not args.name:
            ap.error("-c needs --name")
        todo = {args.name: Case(f"{args.config} as given", overrides=overrides, config=args.config)}
    else:
        names = list(CASES) if args.cases == ["all"] else args.cases
        unknown = [n for n in names if n not in CASES]
        if not names or unknown:
            ap.error(f"name cases from: {', '.join(CASES)} (unknown: {', '.join(unknown)})")
        todo = {n: CASES[n] for n in names}

    ws = Workspace(args.work).prepare()
    try:
        for i, (name, case) in enumerate(todo.items()):
            t0 = time.monotonic()
            if args.in_rig:
                info = record(SlurmRig.attach(), ws, name, case, args.out)
            else:
                # a fresh Slurm per case, its job ids in their own hundreds
                with running_rig(accounting=not args.no_accounting, first_job_id=100 * (i + 1) + 1) as rig:
                    with gym_lock():
                        info = record(rig, ws, name, case, args.out)
                    info["seconds"]["rig_start"] = round(rig.start_seconds or 0, 1)
            info["seconds"]["total"] = round(time.monotonic() - t0, 1)
            (args.out / name / "_meta" / "case.json").write_text(json.dumps(info, indent=2) + "\n")
            print(f"{name}: {info['jobs']} in {info['seconds']}")
    finally:
        ws.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
