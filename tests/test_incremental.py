"""Feeding a run's files in random-sized chunks gives the same model as reading them whole."""

import shutil

from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import CASES
from gymwatch.core.session import RunSession, read_run
from gymwatch.report import to_json

CASE_NAMES = ["aborted_500", "some_never_ran", "startup_failed", "evaluator_bundle", "live_timeline"]


def normalised(state) -> dict:
    data = to_json(state)
    data.pop("root")
    data["servers"] = sorted(data["servers"], key=lambda s: s["name"])
    data["malformed"]["lines"].sort(key=lambda m: (m["file"], m["line"]))
    return data


def files_of(src):
    return sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASE_NAMES), seed=st.randoms(use_true_random=False),
       steps=st.integers(min_value=1, max_value=40))
def test_chunked_equals_whole(tmp_path_factory, case, seed, steps):
    src = CASES / case
    whole = normalised(read_run(str(src), check_processes=False).state)

    dst = tmp_path_factory.mktemp("live")
    rels = files_of(src)
    contents = {r: (src / r).read_bytes() for r in rels}
    # Directories and manifests first (as Gym makes them), then bytes appended in random pieces.
    for r in rels:
        (dst / r).parent.mkdir(parents=True, exist_ok=True)
    written = {r: 0 for r in rels}
    session = None
    for _ in range(steps):
        r = seed.choice(rels)
        left = len(contents[r]) - written[r]
        if left <= 0:
            continue
        n = seed.randint(1, left)
        with open(dst / r, "ab") as fh:
            fh.write(contents[r][written[r]:written[r] + n])
        written[r] += n
        if session is None:
            try:
                session = RunSession.open(str(dst), check_processes=False)
            except Exception:
                continue
        session.poll()
    for r in rels:
        with open(dst / r, "ab") as fh:
            fh.write(contents[r][written[r]:])
    if session is None:
        session = RunSession.open(str(dst), check_processes=False)
    session.poll()
    session.poll(final=True)
    assert normalised(session.state) == whole
    shutil.rmtree(dst, ignore_errors=True)
