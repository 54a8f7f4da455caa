"""The charts and the cost section on a 100k-trial model, in process.

The model is made here, not read: 100k trials of two agents with rewards, token counts (a few
runaway generations), Gym's own durations on half of them and arrival times over ~10 hours, six
servers with timed startup steps (what a watched 0.7 run holds). Measured, best of 5:

- the report's cost section: `core.costs.costs()` and its text lines (also in every text, JSON and
  Markdown report: the ingest figure includes it);
- the Markdown report's pictures: the startup gantt, throughput, rewards, tokens and the cost table
  (`report._md_charts`);
- the screen's charts: a page of `p` / `t` computed again and drawn (`tui/charts.render_page`), at
  200 columns, the slowest of the pages.

Baseline: a bare pass over the same trials that copies each one's reward, token counts and time
into lists and sorts the token lists (the least any of these figures must do). Times are CPU
times of this process (one thread: what the work costs, less the noise of a shared machine).
"""

from __future__ import annotations

import random
import time
from typing import Callable

from .common import fmt_s, row

FULL, SMALL = 100_000, 5_000
TARGET = 5.0        # x the bare pass: the cost section (in every report) and a charts page's redraw


def model(n: int):
    from gymwatch.core.model import (
        S_INSTALL,
        S_READY,
        S_START,
        S_VENV,
        T_COMPLETED,
        T_FAILED,
        T_NEVER_RAN,
        RunInfo,
        RunState,
        Server,
        StepMark,
        Trial,
    )

    rng = random.Random(37)
    t0 = 1_800_000_000.0
    st = RunState(root="/bench", info=RunInfo(agent="agent_a", concurrency=64))
    for i, name in enumerate(("mcqa", "agent_a", "agent_b", "policy_model", "env_a", "env_b")):
        s = Server(name, packages=150 + i)
        at = t0 + i
        s.steps = [StepMark(S_VENV, at), StepMark(S_INSTALL, at + 20 + i), StepMark(S_START, at + 40 + 2 * i),
                   StepMark(S_READY, at + 60 + 3 * i)]
        st.servers[name] = s
    for k in range(n):
        task, rollout = divmod(k, 4)
        roll = rng.random()
        status = T_COMPLETED if roll < 0.95 else T_FAILED if roll < 0.98 else T_NEVER_RAN
        out = 0 if status == T_NEVER_RAN else int(rng.lognormvariate(5, 0.5)) * (40 if rng.random() < 0.001 else 1)
        st.trials[(task, rollout)] = Trial(
            task, rollout, status=status, reward=float(rng.random() < 0.6) if status == T_COMPLETED else None,
            input_tokens=0 if status == T_NEVER_RAN else rng.randint(100, 2000), output_tokens=out,
            agent="agent_a" if k % 3 else "agent_b", arrived=t0 + 120 + k * 0.36,
            latency=rng.uniform(1, 30) if k % 2 else None)
    return st


def best(fn: Callable[[], object], times: int = 5) -> float:
    out = []
    for _ in range(times):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return min(out)


def bare(st) -> None:
    rewards, inp, out, at = [], [], [], []
    for t in st.trials.values():
        rewards.append(t.reward)
        inp.append(t.input_tokens)
        out.append(t.output_tokens)
        at.append(t.arrived)
    inp.sort()
    out.sort()


def run(small: bool) -> list[dict]:
    from gymwatch import charts
    from gymwatch.core import costs
    from gymwatch.report import _md_charts

    n = SMALL if small else FULL
    st = model(n)
    base = best(lambda: bare(st))
    cost = best(lambda: charts.cost_lines(costs.costs(st)))
    md = best(lambda: _md_charts(st))
    size = f"{n // 1000}k trials"
    rows = [
        row(f"charts: the report's cost section ({size})", fmt_s(cost), fmt_s(base), round(cost / base, 2),
            f"<= {TARGET}x", cost / base <= TARGET, "per agent tokens and durations, outliers; in process"),
        row(f"charts: the Markdown report's pictures ({size})", fmt_s(md), fmt_s(base), round(md / base, 2), "",
            note="gantt, throughput, rewards, tokens, cost table; in process"),
    ]
    from gymwatch.tui import charts as screen

    pages = {page: best(lambda page=page: screen.render_page(st, page, 200, st.now)) for page in screen.PAGES}
    worst = max(pages, key=pages.__getitem__)
    paint = pages[worst]
    rows.append(row(f"screen: a charts page drawn again ({size}, 200 columns)", fmt_s(paint), fmt_s(base),
                    round(paint / base, 2), f"<= {TARGET}x", paint / base <= TARGET,
                    f"the slowest page ({worst}), its figures computed again (the run changed; at most once a "
                    f"second); " + ", ".join(f"{p} {fmt_s(t)}" for p, t in pages.items())))
    return rows
