"""`gymwatch run`, `gymwatch stop`, `gymwatch demo`: registered into gymwatch/cli.py."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ..errors import EXIT_INTERRUPTED, UsageError, UserError
from .stop import DEFAULT_GRACE  # a launched run's gym, after SIGTERM

STOP_EPILOG = """A submission (`gym eval submit`, Slurm): its queued jobs are cancelled (a resume chain's next
link first), each running job's driver gets SIGINT (`gym eval run` then stops collecting, keeps
the rows written and shuts its servers down; the job ends as job.sh then exits), and a job still
running after the grace period, or whose driver has not started, is cancelled (`scancel`). Over
SSH when the submission was made from another host. Then it prints what Slurm says of each job.
Exit 0 when every job has ended (or none was left to cancel), 1 when one is still queued or running."""

RUN_EPILOG = """examples:
  gymwatch run -- env start --resources-server mcqa --model-type openai_model \\
      ++policy_base_url=http://127.0.0.1:8000/v1 ++policy_api_key=... ++policy_model_name=m \\
      --then eval run --agent mcqa_simple_agent --input data.jsonl --num-repeats 2 --concurrency 2
  gymwatch run --no-tui -- eval run +split=validation --agent mcqa_simple_agent ...   (one process)

Everything after `--` is a gym command line without the leading `gym`. With `env start ...
--then eval run ...`, gymwatch starts `gym env start`, waits until every server is ready, then
starts `gym eval run --no-serve`. gymwatch adds hydra.run.dir=<run>/hydra/<env_start|eval_run>
and --output <run>/rollouts.jsonl unless you give them; it never adds +nemo_gym_log_dir.
Each gym process runs in its own session with GYMWATCH_RUN_ID=<id> in its environment,
writing <run>/gym_env_start.std{out,err}.log and <run>/gym_eval_run.std{out,err}.log.
Closing the screen asks whether to stop the run; `gymwatch attach DIR` re-opens it and
`gymwatch stop DIR` stops every process of the run.

`-- eval submit -c FILE ...` runs Gym's `gym eval submit` (adding --json, to read Gym's record),
prints the submission's dir and each benchmark's Slurm job (or sbatch's error, whole), then opens
the submission dir as `gymwatch attach` does (with --no-tui: only the lines). Exit 0 when every
benchmark was queued, 1 when sbatch refused some, 3 when nothing was queued. --dry-run and
--resolve-only pass through to Gym. `gymwatch stop SUBMISSION` cancels its jobs."""


def _common_watch(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", metavar="DIR", help="where the run's files go (must not hold rollouts)")
    p.add_argument("--no-tui", action="store_true",
                   help="no screen: print progress to stderr, wait for the collection, print the report")
    p.add_argument("--format", choices=("text", "json", "md"), default="text", help="report format with --no-tui")


SUBMISSION_GRACE = 60.0   # a submission's drivers, after SIGINT: Gym's shutdown of its servers and Ray


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="launch a Gym run (env start + eval run, or one eval run) and watch it",
                         epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                         usage="gymwatch run [options] -- env start ARGS... [--then eval run ARGS...]\n"
                               "       gymwatch run [options] -- eval run ARGS...\n"
                               "       gymwatch run [--no-tui] [--gym BIN] [--cwd DIR] -- eval submit -c FILE ARGS...")
    _common_watch(run)
    run.add_argument("--gym", metavar="BIN", help="the gym executable (default: `gym` on PATH)")
    run.add_argument("--cwd", metavar="DIR", help="working dir of the gym processes (server venvs are "
                     "built under it: reuse one dir to reuse them; default: current dir)")
    run.add_argument("--startup-timeout", type=float, metavar="S",
                     help="when the run is not ready to collect after S seconds, say which servers are pending "
                          "and why (Gym 0.7+: also passed to gym as its spin-up limit, unless the command sets one)")
    run.add_argument("--kill-on-timeout", action="store_true", help="stop the run when --startup-timeout hits")
    run.add_argument("--stop-after", action="store_true",
                     help="with --no-tui: stop the servers once the collection ended (default: leave them)")
    run.add_argument("--on-quit", choices=("ask", "stop", "leave"), default="ask",
                     help="what closing the screen does to a live run (default: ask)")
    run.add_argument("command", nargs=argparse.REMAINDER,
                     help="-- env start ARGS... [--then eval run ARGS...], -- eval run ARGS..., or -- eval submit ARGS...")
    run.set_defaults(func=_run)

    stop = sub.add_parser(
        "stop", help="stop a run gymwatch launched (every process with its marker), or cancel a submission's "
                     "Slurm jobs", epilog=STOP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    stop.add_argument("path", metavar="RUN_OR_SUBMISSION",
                      help="a run dir gymwatch launched (holds gymwatch-manifest.json), or a `gym eval submit`: "
                           "its submission dir, one benchmark's job dir, its record, or its gym job id")
    stop.add_argument("--grace", type=_seconds, metavar="S",
                      help="seconds gym gets to shut down after the signal: a launched run's gym after SIGTERM "
                           f"(default {DEFAULT_GRACE:g}), a submission's drivers after SIGINT (default {SUBMISSION_GRACE:g})")
    stop.set_defaults(func=_stop)

    demo = sub.add_parser(
        "demo", help="a simulated Gym run (no GPU, no network) watched like a real one",
        description="Launch a simulated NeMo Gym 0.4.0 (gymwatch/sim) through the same launcher as `gymwatch run` "
                    "and watch it: mcqa builds its venv on a cold cache (~25 s), 12 trials finish over about a "
                    "minute, one fails (a row in rollouts_failures.jsonl) and two never run (empty output, zero "
                    "usage, reward 0.0). Each server's output is also in its own log (RUN_DIR/logs, Gym's "
                    "+nemo_gym_log_dir). The run is stopped when the screen closes (unless --keep).")
    _common_watch(demo)
    demo.add_argument("--fast", action="store_true", help="compress time: the whole run takes a few seconds")
    demo.add_argument("--keep", action="store_true", help="leave the simulated servers running at the end")
    demo.set_defaults(func=_demo)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds: {text!r}")
    return value


def _user_error(msg: str, usage: bool = False) -> Exception:
    return UsageError(msg) if usage else UserError(msg)


def _run(args: argparse.Namespace) -> int:
    from .manifest import new_run_id
    from .plan import (
        PlanError,
        PlanUsage,
        find_gym,
        gym_version,
        make_plan,
        pass_startup_timeout,
        split_command,
        submit_args,
    )

    try:
        submitting = submit_args(list(args.command))
    except PlanUsage as exc:
        raise _user_error(str(exc), usage=True) from None
    if submitting is not None:
        return _submit(args, submitting)
    run_id = new_run_id()
    run_dir = Path(args.run_dir or Path("gymwatch-runs") / run_id).expanduser().resolve()
    cwd = Path(args.cwd).expanduser().resolve() if args.cwd else Path.cwd()
    try:
        split_command(list(args.command))     # a wrong command line first: a usage error, before gym is looked for
        gym = find_gym(args.gym)
        plan = make_plan(list(args.command), run_dir, cwd, gym)
    except PlanError as exc:
        raise _user_error(str(exc), usage=isinstance(exc, PlanUsage)) from None
    plan.gym_version = gym_version(gym)
    pass_startup_timeout(plan, args.startup_timeout)
    for note in plan.notes:
        print(f"gymwatch: {note}", file=sys.stderr)
    return launch_and_watch(plan, args, run_id)


# `run` options that mean nothing to `eval submit` (Slurm runs the servers and the collection)
_NOT_FOR_SUBMIT = (("run_dir", "--run-dir"), ("startup_timeout", "--startup-timeout"),
                   ("kill_on_timeout", "--kill-on-timeout"), ("stop_after", "--stop-after"))


def _submit(args: argparse.Namespace, words: list[str]) -> int:
    from .plan import PlanError, SubmitPlan, find_gym
    from .submit import SubmitFailed, open_submission, pass_through, print_submitted, submit

    given = [flag for attr, flag in _NOT_FOR_SUBMIT if getattr(args, attr, None)]
    if given:
        raise _user_error(f"{', '.join(given)}: not for `eval submit` (Slurm runs its jobs; its config's "
                          "job.output_path says where they write)", usage=True)
    cwd = Path(args.cwd).expanduser().resolve() if args.cwd else Path.cwd()
    try:
        plan = SubmitPlan(gym=find_gym(args.gym), args=words, cwd=cwd)
    except PlanError as exc:
        raise _user_error(str(exc)) from None
    try:
        if plan.pass_through:
            return pass_through(plan)
        sub = submit(plan)
    except SubmitFailed as exc:
        raise _user_error(str(exc)) from None
    print_submitted(sub, plan)
    if sub.queued and not args.no_tui:
        rc = open_submission(Path(sub.run_dir), getattr(args, "debug", False))
        if rc is not None:
            return rc
    return sub.exit_code


def launch_and_watch(plan, args: argparse.Namespace, run_id: str | None = None) -> int:
    from .runner import RunRefused, ask_on_quit, launch, open_screen, report, wait_headless, watch_session
    from .spawn import SpawnError
    from .stop import stop_run

    try:
        data = launch(plan, getattr(args, "startup_timeout", None), getattr(args, "kill_on_timeout", False),
                      run_id=run_id)
    except (RunRefused, SpawnError) as exc:
        raise _user_error(str(exc)) from None
    run_dir = plan.run_dir
    err = sys.stderr
    print(f"gymwatch: run {data['run_id']} in {run_dir} ({plan.mode}; {data['marker']})", file=err, flush=True)
    if not args.no_tui:
        rc = open_screen(run_dir, plan.head, getattr(args, "debug", False))
        if rc is not None:
            ask_on_quit(run_dir, getattr(args, "on_quit", "ask"))
            return rc
    watch = watch_session(run_dir)
    try:
        why = wait_headless(run_dir, getattr(args, "startup_timeout", None), session=watch)
    except KeyboardInterrupt:
        print(f"\ngymwatch: stopped watching; the run goes on. Stop: gymwatch stop {run_dir}   "
              f"Watch: gymwatch attach {run_dir}", file=err)
        return EXIT_INTERRUPTED
    if why == "timeout" and getattr(args, "kill_on_timeout", False):
        from .runner import after_driver_kill

        after_driver_kill(run_dir, say=lambda s: print(s, file=err))
    text, code = report(run_dir, args.format, watched=watch.state)
    sys.stdout.write(text)
    sys.stdout.flush()
    if getattr(args, "stop_after", False):
        stop_run(run_dir, say=lambda s: print(s, file=err))
    elif why != "timeout" or not getattr(args, "kill_on_timeout", False):
        from .runner import is_live

        if is_live(run_dir):
            print(f"gymwatch: left running. Stop: gymwatch stop {run_dir}   Watch: gymwatch attach {run_dir}",
                  file=err)
    return code


def _stop(args: argparse.Namespace) -> int:
    from .manifest import MANIFEST_NAME
    from .stop import stop_run

    run_dir = Path(args.path).expanduser().resolve()
    if not (run_dir / MANIFEST_NAME).is_file():
        return _stop_submission(args)
    try:
        res = stop_run(run_dir, grace=DEFAULT_GRACE if args.grace is None else args.grace)
    except ValueError as exc:
        raise _user_error(str(exc)) from None
    return 0 if res.ok else 1


def _stop_submission(args: argparse.Namespace) -> int:
    from ..core.cluster.record import SubmissionError, resolve
    from .cancel import StopError, describe, stop_submission
    from .manifest import MANIFEST_NAME

    try:
        sub = resolve(args.path)
    except SubmissionError as exc:
        raise _user_error(f"{exc} (nor is it a run gymwatch launched: no {MANIFEST_NAME})") from None
    say = lambda line: print(line, flush=True)   # noqa: E731
    try:
        res = stop_submission(sub, SUBMISSION_GRACE if args.grace is None else args.grace, say=say)
    except StopError as exc:
        raise _user_error(f"cannot stop {sub.gym_job_id}: {exc}") from None
    if res.nothing_to_cancel:
        print(f"nothing to cancel: no job of {sub.gym_job_id} is queued or running" if res.ok else
              f"nothing to cancel: the jobs of {sub.gym_job_id} still in Slurm are already ending")
    print("Slurm says now:" if res.after.jobs else f"Slurm knows no job of {sub.gym_job_id} any more")
    for line in describe(res):
        print(line)
    return 0 if res.ok else 1


def _demo(args: argparse.Namespace) -> int:
    from .demo import demo_plan

    run_dir = Path(args.run_dir).expanduser().resolve() if args.run_dir else \
        Path(tempfile.mkdtemp(prefix="gymwatch-demo-"))
    plan = demo_plan(run_dir, fast=args.fast)
    ns = argparse.Namespace(no_tui=args.no_tui, format=args.format, startup_timeout=None,
                            kill_on_timeout=False, stop_after=not args.keep,
                            on_quit="leave" if args.keep else "stop", debug=getattr(args, "debug", False))
    return launch_and_watch(plan, ns)
