"""The report's pictures and cost section: the Markdown charts of a timed model compared whole with
the text they must be, the startup gantt checked against Mermaid's gantt grammar (its lexer's rules
and its task data's forms, from mermaid's gantt.jison and ganttDb), hostile names kept out of the
Mermaid syntax, and the cost section in every format on recorded runs."""

from __future__ import annotations

import json
import re

import pytest

from conftest import CASES, CASES07, json_report
from gymwatch import charts
from gymwatch.core import timeline
from gymwatch.core.model import T_FAILED, T_NEVER_RAN, RunInfo, RunState
from gymwatch.core.session import read_run
from gymwatch.report import _md_charts, to_markdown, to_text
from test_figures import COLD, T0, feed_timed, trial


def timed_run() -> RunState:
    """Two servers timed as they started (test_figures.COLD), 12 trials seen over four minutes: one
    runaway generation, one failure, one never-ran."""
    st = feed_timed(COLD)
    st.info = RunInfo(agent="mcqa_simple_agent", concurrency=4)
    outs = [90, 95, 100, 100, 100, 105, 110, 100, 100, 5000]
    ts = [trial(i, reward=float(i % 2), inp=200 + i, out=o, arrived=T0 + 60 + i * 20, agent="")
          for i, o in enumerate(outs)]
    ts += [trial(10, status=T_FAILED, arrived=T0 + 130, agent=""),
           trial(11, status=T_NEVER_RAN, inp=0, out=0, arrived=T0 + 250, agent="")]
    st.trials = {t.key: t for t in ts}
    return st


EXPECTED = """
## Startup timeline

```mermaid
gantt
    title Startup: each server's steps, ready after 55s
    dateFormat x
    axisFormat %H:%M:%S
    section mcqa
    venv create 12s :s0_0, 1800000000000, 1800000012000
    install 161 packages 8.0s :s0_1, 1800000012000, 1800000020000
    start then ready 20s :s0_2, 1800000020000, 1800000040000
    section policy (critical path)
    venv create + install 159 packages 22s :crit, s1_0, 1800000000000, 1800000022000
    start then ready 33s :crit, s1_1, 1800000022000, 1800000055000
```

- mcqa: venv create 12s, install 161 packages 8.0s, start 20s; ready
- policy (critical path): venv create + install 159 packages 22s, start 33s; ready

## Throughput

Results per 10 s, by when gymwatch saw each result arrive: █ completed, × failed, ░ never ran.

```text
+0:00 1 ████████████████████████████████████████
+0:10 0
+0:20 1 ████████████████████████████████████████
+0:30 0
+0:40 1 ████████████████████████████████████████
+0:50 0
+1:00 1 ████████████████████████████████████████
+1:10 1 ××××××××××××××××××××××××××××××××××××××××  1 failed
+1:20 1 ████████████████████████████████████████
+1:30 0
+1:40 1 ████████████████████████████████████████
+1:50 0
+2:00 1 ████████████████████████████████████████
+2:10 0
+2:20 1 ████████████████████████████████████████
+2:30 0
+2:40 1 ████████████████████████████████████████
+2:50 0
+3:00 1 ████████████████████████████████████████
+3:10 1 ░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░  1 never ran
```

## Rewards

mcqa_simple_agent (10):

```text
0 5 ████████████████████████████████████████
1 5 ████████████████████████████████████████
```

mean reward per task (10):

```text
0 5 ████████████████████████████████████████
1 5 ████████████████████████████████████████
```

## Tokens per trial

input tokens per trial (11 trials that ran):

```text
100 1 ████████████████████████████████████████
200 1 ████████████████████████████████████████
201 1 ████████████████████████████████████████
202 1 ████████████████████████████████████████
203 1 ████████████████████████████████████████
204 1 ████████████████████████████████████████
205 1 ████████████████████████████████████████
206 1 ████████████████████████████████████████
207 1 ████████████████████████████████████████
208 1 ████████████████████████████████████████
209 1 ████████████████████████████████████████
```

output tokens per trial (11 trials that ran):

```text
  10 1 ████████
  90 1 ████████
  95 1 ████████
 100 5 ████████████████████████████████████████
 105 1 ████████
 110 1 ████████
5000 1 ████████
```

## Cost and speed per agent

Per trial: p50 / p90 / max; durations p50 / p90. Far off: README's "Cost and speed" rule.

| agent | trials | input tokens | per trial | output tokens | per trial | duration | far off |
|---|---|---|---|---|---|---|---|
| mcqa_simple_agent | 12 | 2145 | 204 / 208 / 209 | 5910 | 100 / 110 / 5000 | 1m10s / 1m20s (estimated from arrivals) | 1 |

Far off their peers (mcqa_simple_agent):

- task 9 rollout 0: 5000 output tokens (typical 100)"""


def test_the_markdown_charts_of_a_timed_run_are_exactly_these():
    assert "\n".join(_md_charts(timed_run())) == EXPECTED


# --- Mermaid's gantt grammar ----------------------------------------------------------------
# mermaid's gantt.jison lexer, its rules in order for what a line may start with, and ganttDb's
# task data: [tags,] [id,] start, end|duration; dateFormat `x` is milliseconds since the epoch.
_KEYWORDS = re.compile(r"(?i)(href\s+\"|call\s|click\s|gantt|dateFormat\s|inclusiveEndDates|topAxis|axisFormat\s|"
                       r"tickInterval\s|includes\s|excludes\s|todayMarker\s|weekday\s|\d\d\d\d-\d\d-\d\d|title\s|"
                       r"accDescription\s|accTitle|accDescr|section\s|%%)")
_TAGS = ("active", "done", "crit", "milestone")


def mermaid_gantt_errors(block: list[str]) -> list[str]:
    """What in a ```mermaid block breaks Mermaid's gantt grammar ([] when nothing)."""
    errors = []
    if block[:1] != ["```mermaid"] or block[-1:] != ["```"]:
        return ["not a ```mermaid block"]
    body = [ln.strip() for ln in block[1:-1] if ln.strip()]
    if body[:1] != ["gantt"]:
        return ["does not start with `gantt`"]
    fmt, ids, tasks = None, set(), 0
    for line in body[1:]:
        if any(c in line for c in "#;") or "\r" in line:
            errors.append(f"`#` or `;` cuts the line: {line!r}")
            continue
        if m := re.fullmatch(r"dateFormat\s(.+)", line):
            fmt = m.group(1).strip()
        elif re.fullmatch(r"(axisFormat|title)\s.+", line):
            pass
        elif re.fullmatch(r"section\s[^:]+", line):
            pass
        elif m := re.fullmatch(r"([^:]+)(:.+)", line):
            text, data = m.group(1), [d.strip() for d in m.group(2)[1:].split(",")]
            if _KEYWORDS.match(text.strip()):
                errors.append(f"task text lexed as a keyword: {text!r}")
            while data and data[0] in _TAGS:
                data.pop(0)
            if len(data) == 3:
                if not re.fullmatch(r"[A-Za-z_][\w-]*", data[0]) or data[0] in ids:
                    errors.append(f"bad or repeated id: {data[0]!r}")
                ids.add(data.pop(0))
            if len(data) != 2:
                errors.append(f"task data is not [tags,] [id,] start, end: {line!r}")
                continue
            start, end = data
            if fmt != "x" or not start.isdigit() or not (end.isdigit() or re.fullmatch(r"\d+(\.\d+)?(ms|[Mdhmswy])", end)):
                errors.append(f"start / end not in dateFormat {fmt}: {line!r}")
            elif end.isdigit() and int(end) <= int(start):
                errors.append(f"ends before it starts: {line!r}")
            tasks += 1
        else:
            errors.append(f"no statement of the gantt grammar: {line!r}")
    return errors + ([] if tasks else ["no task"])


def test_the_checker_finds_what_mermaid_refuses():
    good = charts.mermaid_gantt(timeline.startup(timed_run()))
    assert mermaid_gantt_errors(good) == []
    assert mermaid_gantt_errors(["```mermaid", "gantt", "    dateFormat x", "    a: b :s1, 1, 2", "```"])
    assert mermaid_gantt_errors(["```mermaid", "gantt", "    dateFormat x", "    title a", "```"]) == ["no task"]
    assert mermaid_gantt_errors(["```mermaid", "gantt", "    dateFormat x", "    section x#y", "    t :1, 2", "```"])
    assert mermaid_gantt_errors(["```mermaid", "gantt", "    dateFormat x", "    t :s, 5, 2", "```"])


@pytest.mark.parametrize("name", ["mcqa: evil", "a#b", "x;y", "title case", "section", "%%{init}%%", "új-szerver",
                                  "line\nbreak", "click me", "[bold]x[/bold]", "\x1b[31mred"])
def test_a_servers_name_never_breaks_the_gantt(name):
    st = feed_timed([(0, name, "Creating virtual environment at: /w/x/.venv"),
                     (5, name, "INFO:     Uvicorn running on http://127.0.0.1:9001 (Press CTRL+C to quit)")])
    block = charts.mermaid_gantt(timeline.startup(st))
    assert block and mermaid_gantt_errors(block) == []


def test_a_step_still_going_is_active_and_ends_now():
    st = feed_timed(COLD[:3])
    block = charts.mermaid_gantt(timeline.startup(st, now=T0 + 30))
    assert mermaid_gantt_errors(block) == []
    assert any(":active, " in line and line.endswith(", 1800000030000") for line in block)


# --- in the reports ---------------------------------------------------------------------------
def test_a_report_read_after_the_fact_says_why_its_timeline_has_no_times():
    md = to_markdown(read_run(str(CASES07 / "g07_health_summary"), check_processes=False).state)
    assert "```mermaid" not in md and "No times: gymwatch times each server's steps while it watches" in md
    assert "- mcqa: start (untimed); ready" in md
    # its rows say when the model answered: the throughput stands on those
    assert "by when the model answered each (response.created_at" in md
    assert "| mcqa_simple_agent | 10 | 1486 | 297 / 307 / 307 | 54 | 9 / 9 / 9 |" in md


def test_the_text_and_json_reports_carry_the_cost_section():
    text = to_text(timed_run())
    assert ("startup (each server's steps on one time axis; * the server everything waited for):\n"
            "  mcqa   |████████▓▓▓▓▓▓████████████████          | ready at +40s\n"        # 40 cells for 55 s
            "* policy |████████████████▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓▓| ready at +55s\n") in text
    assert ("  mcqa_simple_agent: 12 trial(s); input tokens 2145 (204 / 208 / 209), output tokens 5910 "
            "(100 / 110 / 5000); duration 1m10s / 1m20s (estimated from arrivals)") in text
    assert "    far off: task 9 rollout 0: 5000 output tokens (typical 100)" in text
    data, _ = json_report(CASES07 / "g07_health_summary")
    cost, = data["costs"]
    assert cost["agent"] == "mcqa_simple_agent" and cost["duration_from"] == "gym"
    assert cost["output_tokens_per_trial"] == {"n": 6, "p50": 9.0, "p90": 9.0, "max": 9.0}
    assert set(cost) == {"agent", "trials", "trials_ran", "input_tokens", "output_tokens", "input_tokens_per_trial",
                         "output_tokens_per_trial", "duration_s", "duration_from", "outliers", "outlier_counts"}
    json.dumps(data)


@pytest.mark.parametrize("case", [CASES / "aborted_500", CASES / "startup_failed", CASES07 / "g07_some_never_ran"])
def test_every_markdown_report_has_its_charts(case):
    md = to_markdown(read_run(str(case), check_processes=False).state)
    for head in ("## Startup timeline", "## Throughput", "## Rewards", "## Tokens per trial", "## Cost and speed per agent"):
        assert head in md
