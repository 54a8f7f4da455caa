"""`gymwatch diff A B`: what changed between two runs. No Textual here (the browser's compare
screen shows the same `compare()` result).

Both runs are read as `gymwatch report` reads them (core.session.read_run: the same model and
verdict), so runs of different Gym versions compare: a trial is (task_index, rollout_index),
whatever wrote it. The comparison lists

- the statistics of the trials both runs scored, paired on (task, rollout) (diffstats.py), and Gym's
  own `gym eval compare` report beside them when one sits beside a run (gymcompare.py);
- every trial whose status or reward differs (a trial a run does not have is null there), and
  whether it got worse: completed in A and failed / never ran / missing / absent in B, or a lower
  reward in B;
- per task, the mean reward (over completed trials, as the report's) and the status counts in each;
- per server, its time to ready in each (null, "not timed" in the text, when the run was not
  watched live: a recorded run read after the fact, whose servers' lines carry no time) and its state;
- the two verdicts.

Two submissions (`gym eval submit`) of several benchmarks are compared benchmark by benchmark, each
with the one of the same name; a submission of one benchmark is that benchmark's run.

Exit codes: 0 no trial got worse, 1 some did, 3 a side is unreadable (one line naming its path).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from pydantic_core import to_json

from . import __version__
from .core.model import T_COMPLETED, T_FAILED, T_MISSING, T_NEVER_RAN, TRIAL_STATUSES, RunState, Trial, scored
from .core.sanitize import clean
from .core.verdict import EXIT_INPUT, EXIT_OK, EXIT_TRIALS, counts, mean_reward, verdict
from .diffstats import signed

WORSE_STATUSES = (T_FAILED, T_NEVER_RAN, T_MISSING, None)     # None: the trial is not in that run


class Unreadable(Exception):
    """A side of the comparison cannot be read: the message names its path."""


def load(path: str, check_processes: bool = True) -> RunState:
    """The run at `path` (a submission: its one benchmark), as the report reads it."""
    got = load_side(path, check_processes)
    if isinstance(got, dict):
        raise Unreadable(f"{path}: a submission of {len(got)} benchmarks ({', '.join(got)}): name one "
                         "benchmark's job dir")
    return got


def load_side(path: str, check_processes: bool = True) -> RunState | dict[str, RunState]:
    """The run at `path`, or each benchmark's of a submission of several (by benchmark name)."""
    from .core.jobsession import read_submission
    from .core.layout import NotARun
    from .core.session import read_run
    from .core.target import IsSubmission

    try:
        try:
            return read_run(path, check_processes=check_processes).state
        except IsSubmission as exc:
            return {name: s.state for name, s in read_submission(exc.submission).sessions.items()}
    except NotARun as exc:
        raise Unreadable(str(exc) if path in str(exc) else f"cannot read {path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - one line naming the path, never a traceback
        raise Unreadable(f"cannot read {path}: {type(exc).__name__}: {exc}") from None


def compare_benchmarks(a: dict[str, RunState], b: dict[str, RunState], paths: tuple[str, str]) -> dict[str, Any]:
    """Two submissions compared benchmark by benchmark (each with the one of the same name)."""
    common = [n for n in a if n in b]
    out = [{"benchmark": n, **compare(a[n], b[n], (f"{paths[0]}/{n}", f"{paths[1]}/{n}"))} for n in common]
    return {"gymwatch_version": __version__, "a": paths[0], "b": paths[1], "benchmarks": out,
            "only_in_a": [n for n in a if n not in b], "only_in_b": [n for n in b if n not in a],
            "exit_code": max((d["exit_code"] for d in out), default=EXIT_OK)}


def render_benchmarks(d: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return _json(d)
    out = []
    for one in d["benchmarks"]:
        name = clean(one["benchmark"])
        out.append((f"## benchmark {_md(name)}\n\n" if fmt == "md" else f"=== {name} ===\n") + render(one, fmt))
    for side, names in (("A", d["only_in_a"]), ("B", d["only_in_b"])):
        if names:
            out.append(f"only in {side}: {', '.join(clean(n) for n in names)}\n")
    return "\n".join(out)


def change(a: Optional[Trial], b: Optional[Trial]) -> str:
    """'worse', 'better' or 'changed' (status or reward differ otherwise); '' when the same."""
    sa, sb = (a.status if a else None), (b.status if b else None)
    ra, rb = (a.reward if a else None), (b.reward if b else None)
    if sa == sb and ra == rb:
        return ""
    if sa == T_COMPLETED and sb in WORSE_STATUSES:
        return "worse"
    if sb == T_COMPLETED and sa in WORSE_STATUSES:
        return "better"
    if ra is not None and rb is not None and sa == sb == T_COMPLETED:
        return "worse" if rb < ra else "better"
    return "changed"


def _side(state: RunState) -> dict[str, Any]:
    from .core import gymversion

    v = verdict(state)
    version, _ = gymversion.version(state)
    return {"path": state.root, "verdict": v.name, "reason": v.reason, "exit_code": v.exit_code,
            "counts": counts(state), "mean_reward": mean_reward(state), "gym_version": version or None,
            "environment": state.info.environment or None, "agent": state.info.agent or None}


def _task_stats(trials: list[Trial]) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(TRIAL_STATUSES, 0)
    for t in trials:
        out[t.status] += 1
    rewards = [t.reward for t in trials if scored(t)]
    out["mean_reward"] = sum(rewards) / len(rewards) if rewards else None     # type: ignore[arg-type]
    out["trials"] = len(trials)
    return out


def _time_to_ready(state: RunState, name: str) -> Optional[float]:
    from .report import time_to_ready

    s = state.servers.get(name)
    return time_to_ready(s) if s is not None else None


def compare(a: RunState, b: RunState, paths: Optional[tuple[str, str]] = None) -> dict[str, Any]:
    """The whole comparison (the JSON). `paths`: what the user named A and B, to look for Gym's own
    comparison report beside them."""
    from . import diffstats, gymcompare

    joined = diffstats.join(a, b)
    trials, tasks = [], []
    for task, pairs in joined:
        for rollout, ta, tb in pairs:
            what = change(ta, tb)
            if what:
                trials.append({
                    "task_index": task, "rollout_index": rollout,
                    "a_status": ta.status if ta else None, "b_status": tb.status if tb else None,
                    "a_reward": ta.reward if ta else None, "b_reward": tb.reward if tb else None,
                    "change": what})
        tasks.append({"task_index": task, "a": _task_stats([ta for _, ta, _ in pairs if ta is not None]),
                      "b": _task_stats([tb for _, _, tb in pairs if tb is not None])})
    stats, per_task = diffstats.paired_stats(joined)
    for t in tasks:
        t.update(per_task.get(t["task_index"]) or diffstats.TaskPairs().json(False))
    servers = []
    for name in sorted(set(a.servers) | set(b.servers)):
        sa, sb = a.servers.get(name), b.servers.get(name)
        servers.append({"name": name, "a_time_to_ready": _time_to_ready(a, name),
                        "b_time_to_ready": _time_to_ready(b, name),
                        "a_state": sa.state if sa else None, "b_state": sb.state if sb else None})
    worse = sum(1 for t in trials if t["change"] == "worse")
    return {"gymwatch_version": __version__, "a": _side(a), "b": _side(b), "trials": trials,
            "tasks": tasks, "servers": servers, "worse": worse,
            "better": sum(1 for t in trials if t["change"] == "better"),
            "stats": stats, "gym_compare": gymcompare.find(*paths, a, b, stats, per_task) if paths else None,
            "exit_code": EXIT_TRIALS if worse else EXIT_OK}


# --- rendering -------------------------------------------------------------------------
def reward(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def status(x: Optional[str]) -> str:
    return "absent" if x is None else x


def seconds(x: Optional[float]) -> str:
    return NOT_TIMED if x is None else f"{x:.1f}s"


# A run read after the fact (recorded, copied) has no time for its servers' lines: gymwatch times a
# server's start only while it watches (docs/gym-formats.md: server lines carry no timestamps).
NOT_TIMED = "not timed"


def counts_text(c: dict[str, Any]) -> str:
    return f"{c[T_COMPLETED]} ok, {c[T_FAILED]} failed, {c[T_NEVER_RAN]} never ran, {c[T_MISSING]} missing"


def table(header: list[str], rows: list[list[str]], right: frozenset[int] = frozenset(), indent: str = "  ") -> list[str]:
    """Rows under a header, each column as wide as its widest cell (`right`: numbers, right-aligned)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out = []
    for r in [header, *rows]:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        out.append((indent + "  ".join(cells)).rstrip())
    return out


def to_text(d: dict[str, Any]) -> str:
    out = []
    for side in ("a", "b"):
        s = d[side]
        out.append(f"{side.upper()}: {clean(s['path'])}  (Gym {s['gym_version'] or '?'})")
        out.append(f"   verdict {s['verdict']}: {clean(s['reason'])}")
        out.append(f"   {counts_text(s['counts'])}; mean reward {reward(s['mean_reward'])}")
    out.append("")
    out += stats_lines(d)
    n = len(d["trials"])
    out.append(f"trials that changed: {n}" + (f" ({d['worse']} worse, {d['better']} better)" if n else ""))
    if n:
        out += table(["task", "rollout", "A status", "A reward", "B status", "B reward", ""],
                     [[str(t["task_index"]), str(t["rollout_index"]), status(t["a_status"]), reward(t["a_reward"]),
                       status(t["b_status"]), reward(t["b_reward"]), "WORSE" if t["change"] == "worse" else t["change"]]
                      for t in d["trials"]], right=frozenset({0, 1, 3, 5}))
    out.append("")
    out.append("tasks (trials ok/failed/never ran/missing; * changed; paired: the trials both runs scored):")
    rows = []
    for t in d["tasks"]:
        a, b = t["a"], t["b"]
        same = (a["mean_reward"], counts_key(a)) == (b["mean_reward"], counts_key(b))
        rows.append([str(t["task_index"]), reward(a["mean_reward"]), reward(b["mean_reward"]), short_counts(a),
                     short_counts(b), *paired_cells(t), "" if same else "*"])
    out += table(["task", "A mean", "B mean", "A trials", "B trials", "paired", "A -> B paired", "change", "flipped", ""],
                 rows, right=frozenset({0, 1, 2, 5, 7}))
    out.append("")
    out.append(f"servers (time to ready: {NOT_TIMED} when the run was not watched live):")
    out += table(["server", "A ready in", "A state", "B ready in", "B state"],
                 [[clean(s["name"]), seconds(s["a_time_to_ready"]), status(s["a_state"]),
                   seconds(s["b_time_to_ready"]), status(s["b_state"])] for s in d["servers"]])
    out.append("")
    out.append(f"verdicts: {d['a']['verdict']} -> {d['b']['verdict']}")
    out.append("no trial got worse" if not d["worse"] else f"{d['worse']} trial(s) got worse")
    return "\n".join(out) + "\n"


def stats_lines(d: dict[str, Any]) -> list[str]:
    """The statistics section: the verdict line, its figures, the flipped tasks, Gym's own
    comparison beside them."""
    from .diffstats import flip_text, summary_lines
    from .gymcompare import lines

    s = d["stats"]
    out = ["paired on (task, rollout), the trials both runs scored:", f"  {s['verdict']}"]
    out += [f"  {line}" for line in summary_lines(s)]
    if s["flipped"]:
        out.append(f"  flipped tasks ({len(s['flipped'])}):")
        out += [f"    {flip_text(f)}" for f in s["flipped"]]
    out.append("")
    if d["gym_compare"] is not None:
        out += [clean(line) for line in lines(d["gym_compare"])] + [""]
    return out


def paired_cells(t: dict[str, Any]) -> list[str]:
    """A task's paired figures: its paired trials, their mean in A -> in B, the change, the flip."""
    if not t["paired"]:
        return ["0", "", "", ""]
    return [str(t["paired"]), f"{reward(t['a_paired_mean'])} -> {reward(t['b_paired_mean'])}", signed(t["change"]),
            FLIP_WORDS.get(t["flip"] or "", "")]


def counts_key(c: dict[str, Any]) -> tuple:
    return tuple(c[s] for s in TRIAL_STATUSES)


def short_counts(c: dict[str, Any]) -> str:
    return f"{c[T_COMPLETED]}/{c[T_FAILED]}/{c[T_NEVER_RAN]}/{c[T_MISSING]}"


def _md(text: str) -> str:
    return clean(text).replace("|", "\\|")


def to_markdown(d: dict[str, Any]) -> str:
    out = ["# gymwatch diff", "", "| | run | Gym | verdict | ok / failed / never ran / missing | mean reward |",
           "|---|---|---|---|---|---|"]
    for side in ("a", "b"):
        s = d[side]
        out.append(f"| {side.upper()} | `{_md(s['path'])}` | {s['gym_version'] or '?'} | **{s['verdict']}** | "
                   f"{short_counts(s['counts'])} | {reward(s['mean_reward'])} |")
    out += md_stats(d)
    out += ["", f"## Trials that changed ({len(d['trials'])}; {d['worse']} worse)", ""]
    if d["trials"]:
        out += ["| task | rollout | A status | A reward | B status | B reward | |", "|---|---|---|---|---|---|---|"]
        for t in d["trials"]:
            out.append(f"| {t['task_index']} | {t['rollout_index']} | {status(t['a_status'])} | {reward(t['a_reward'])} "
                       f"| {status(t['b_status'])} | {reward(t['b_reward'])} | {'**worse**' if t['change'] == 'worse' else t['change']} |")
    out += ["", "## Tasks", "", "| task | A mean | B mean | A ok/failed/never/missing | B ok/failed/never/missing "
            "| paired | A paired mean | B paired mean | change | flipped |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in d["tasks"]:
        out.append(f"| {t['task_index']} | {reward(t['a']['mean_reward'])} | {reward(t['b']['mean_reward'])} "
                   f"| {short_counts(t['a'])} | {short_counts(t['b'])} | {t['paired']} | {reward(t['a_paired_mean'])} "
                   f"| {reward(t['b_paired_mean'])} | {'-' if t['change'] is None else signed(t['change'])} "
                   f"| {FLIP_WORDS.get(t['flip'] or '', '')} |")
    out += ["", "## Servers", "", "| server | A time to ready | B time to ready | A state | B state |",
            "|---|---|---|---|---|"]
    for s in d["servers"]:
        out.append(f"| {_md(s['name'])} | {seconds(s['a_time_to_ready'])} | {seconds(s['b_time_to_ready'])} "
                   f"| {status(s['a_state'])} | {status(s['b_state'])} |")
    return "\n".join(out) + "\n"


FLIP_WORDS = {"pass_to_fail": "passed -> failed", "fail_to_pass": "failed -> passed"}


def md_stats(d: dict[str, Any]) -> list[str]:
    from .diffstats import flip_text, summary_lines
    from .gymcompare import lines

    s = d["stats"]
    out = ["", "## Statistics", "", "Paired on (task, rollout): the trials both runs scored.", "",
           f"**{_md(s['verdict'])}**", ""]
    out += [f"- {_md(line)}" for line in summary_lines(s)]
    if s["flipped"]:
        out += ["", f"Flipped tasks ({len(s['flipped'])}):", ""] + [f"- {_md(flip_text(f))}" for f in s["flipped"]]
    g = d["gym_compare"]
    if g is not None:
        head, *rest = lines(g)
        out += ["", "### " + _md(head), ""]
        out += [("  - " if line.startswith("    - ") else "- ") + _md(line.strip().removeprefix("- "))
                for line in rest]
    return out


def _json(d: dict[str, Any]) -> str:
    """The report's encoder (json's own is pure Python once it indents), ASCII as json's default."""
    return to_json(d, indent=2, ensure_ascii=True).decode() + "\n"


def render(d: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return _json(d)
    if fmt == "md":
        return to_markdown(d)
    return to_text(d)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="what changed between two runs, with its uncertainty (trials, tasks, servers, "
                       "verdicts)",
                       description="Compare run A with run B. First a verdict line from the trials both runs "
                       "scored, paired on (task, rollout): how many tasks got worse / better, the mean reward "
                       "difference with a 95% interval (tasks resampled; none below 10 tasks), McNemar's exact "
                       "test for 0/1 rewards, the tasks that flipped; trials one run did not score are counted "
                       "apart. Gym's own `gym eval compare` report (compare_report.json beside B or A) is shown "
                       "beside it, with where the two disagree. Then the trials whose status or reward changed, "
                       "per-task mean reward and counts, servers' time to ready, the two verdicts. Exit 0: no "
                       "trial got worse; 1: some did (completed -> failed / never ran / missing, or a lower "
                       "reward); 3: a run is unreadable.")
    p.add_argument("a", metavar="A", help="the earlier (reference) run (or submission: each benchmark is compared "
                                          "with B's of the same name)")
    p.add_argument("b", metavar="B", help="the run (or submission) to compare with it")
    p.add_argument("--format", choices=("text", "json", "md"), default="text")
    p.add_argument("--no-process-check", action="store_true",
                   help="do not look for live gym processes (treat both runs as ended)")
    p.add_argument("--no-slurm", action="store_true",
                   help="submissions: do not ask Slurm about their jobs, read their states from their files alone")
    p.set_defaults(func=_diff)


def _diff(args: argparse.Namespace) -> int:
    from .core import fast

    if args.no_slurm:
        from .core.slurmfeed import files_alone

        files_alone()
    try:
        with fast.bulk_load(keep=True):       # both models live until the process ends
            a = load_side(args.a, not args.no_process_check)
            b = load_side(args.b, not args.no_process_check)
        if isinstance(a, dict) != isinstance(b, dict):
            many, path = (a, args.a) if isinstance(a, dict) else (b, args.b)
            raise Unreadable(f"{path}: a submission of {len(many)} benchmarks ({', '.join(many)}), compared with "
                             "one run: name one benchmark's job dir")
    except Unreadable as exc:
        print(f"gymwatch: diff: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_INPUT
    if isinstance(a, dict) and isinstance(b, dict):
        both = compare_benchmarks(a, b, (args.a, args.b))
        sys.stdout.write(render_benchmarks(both, args.format))
        return both["exit_code"]
    assert not isinstance(a, dict) and not isinstance(b, dict)
    d = compare(a, b, (args.a, args.b))
    sys.stdout.write(render(d, args.format))
    return d["exit_code"]
