"""What the user names, resolved into a Submission (gymwatch/core/cluster/record.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gymwatch.core.cluster import record
from gymwatch.core.cluster.record import SubmissionError, resolve

SLURM = Path(__file__).parent / "fixtures" / "gym-0.7.0-slurm"
CASES = sorted(p.name for p in SLURM.iterdir() if (p / "_meta").is_dir())


def submission_dir(case: str) -> Path:
    return next((SLURM / case).glob("gym-job-*"))


@pytest.mark.parametrize("case", CASES)
def test_a_recorded_submission_dir_reads_its_record_and_its_own_files(case):
    root = submission_dir(case)
    sub = resolve(root)
    meta = json.loads((SLURM / case / "_meta" / "submit.json").read_text())
    assert sub.gym_job_id == root.name == meta["gym_job_id"]
    assert (sub.version, sub.executor, sub.cluster, sub.hostname) == ("0.7.0", "slurm", "local", None)
    assert sub.root == root and sub.record == root / "gym-job.json"
    [bench] = sub.benchmarks
    assert bench.name == "mcqa" and bench.first_job_id == meta["benchmarks"][0]["job_id"]
    # The record says /tmp/slurmrec/runs/...: the files are read where the record is.
    assert bench.job_dir.startswith("/tmp/slurmrec/runs/")
    assert bench.local_dir == root / "mcqa" and bench.sbatch_error is None


def test_a_benchmark_job_dir_is_its_submission_with_that_benchmark_in_focus():
    root = submission_dir("real_mcqa_cold")
    sub = resolve(root / "mcqa")
    assert sub.gym_job_id == root.name and sub.focus == "mcqa" and sub.root == root


def test_the_manifest_file_itself():
    root = submission_dir("resumable_chain_svc_dies_with_sacct")
    assert resolve(root / "gym-job.json").benchmarks[0].first_job_id == "12"


def _index_with(tmp_path: Path, case: str) -> tuple[Path, str]:
    index = tmp_path / "cache" / "nemo-gym" / "jobs"
    index.mkdir(parents=True)
    payload = json.loads((SLURM / case / "_meta" / "index.json").read_text())
    (index / f"{payload['gym_job_id']}.json").write_text(json.dumps(payload))
    return index, payload["gym_job_id"]


def test_a_bare_gym_job_id_is_looked_up_in_the_local_index_whose_run_dir_is_not_here(tmp_path):
    index, gym_job_id = _index_with(tmp_path, "real_mcqa_cold")
    sub = resolve(gym_job_id, index=index)
    assert sub.gym_job_id == gym_job_id and sub.record == index / f"{gym_job_id}.json"
    # /tmp/slurmrec/runs/... does not exist here: Slurm can still be asked, no file is read.
    assert sub.root is None and sub.benchmarks[0].local_dir is None
    assert sub.benchmarks[0].first_job_id == "17"
    assert any("not on this machine" in n for n in sub.notes)


def test_an_index_record_whose_run_dir_exists_reads_the_submission_there(tmp_path):
    index, gym_job_id = _index_with(tmp_path, "real_mcqa_cold")
    copy = tmp_path / "runs" / gym_job_id
    shutil.copytree(submission_dir("real_mcqa_cold"), copy)
    payload = json.loads((index / f"{gym_job_id}.json").read_text())
    payload["run_dir"] = str(copy)
    payload["benchmarks"][0]["job_dir"] = str(copy / "mcqa")
    (index / f"{gym_job_id}.json").write_text(json.dumps(payload))
    sub = resolve(index / f"{gym_job_id}.json", index=index)
    assert sub.root == copy and sub.benchmarks[0].local_dir == copy / "mcqa"


def test_an_unknown_gym_job_id_names_the_index_file_it_looked_for(tmp_path):
    with pytest.raises(SubmissionError) as e:
        resolve("gym-job-20990101T000000Z-000000", index=tmp_path)
    assert str(tmp_path / "gym-job-20990101T000000Z-000000.json") in str(e.value)
    assert "\n" not in str(e.value)


def test_the_index_dir_follows_xdg_cache_home(tmp_path):
    assert record.index_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "nemo-gym" / "jobs"
    assert record.index_dir({}) == Path.home() / ".cache" / "nemo-gym" / "jobs"
    assert record.index_dir({"XDG_CACHE_HOME": ""}) == record.index_dir({})   # empty is unset, as for Gym


def _write_submission(tmp_path: Path, payload: dict, benches: dict[str, str]) -> Path:
    root = tmp_path / payload["gym_job_id"]
    root.mkdir()
    (root / "gym-job.json").write_text(json.dumps(payload))
    for name, job_sh in benches.items():
        (root / name / "logs").mkdir(parents=True)
        (root / name / "job.sh").write_text(job_sh)
    return root


def _payload(**over) -> dict:
    base = {"gym_job_id": "gym-job-20261207T100000Z-abcdef", "gym_version": "0.7.0", "gym_commit": None,
            "submitted_at": "2026-12-07T10:00:00Z", "run_dir": "/lustre/u/runs/gym-job-20261207T100000Z-abcdef",
            "cluster": "big", "executor": "slurm", "submitted_by": "me", "hostname": "login.example.org",
            "benchmarks": [{"benchmark": "aime", "job_dir": "/lustre/u/runs/gym-job-20261207T100000Z-abcdef/aime",
                            "job_id": "4242", "error": None}],
            "executor_metadata": {}, "schema_version": 1}
    base.update(over)
    return base


def test_a_record_from_another_host_reads_its_paths_under_the_copy_and_keeps_the_host(tmp_path):
    root = _write_submission(tmp_path, _payload(), {"aime": "#!/bin/bash\n"})
    sub = resolve(root)
    assert sub.hostname == "login.example.org" and sub.cluster == "big"
    assert sub.benchmarks[0].job_dir == "/lustre/u/runs/gym-job-20261207T100000Z-abcdef/aime"
    assert sub.benchmarks[0].local_dir == root / "aime"


def test_a_rejected_sbatch_has_no_job_and_keeps_the_error_text(tmp_path):
    benches = [{"benchmark": "aime", "job_dir": "/lustre/u/runs/gym-job-20261207T100000Z-abcdef/aime",
                "job_id": None, "error": "sbatch: error: Batch job submission failed: Invalid account or "
                                         "account/partition combination specified"},
               {"benchmark": "gpqa", "job_dir": "/lustre/u/runs/gym-job-20261207T100000Z-abcdef/gpqa",
                "job_id": "4243", "error": None}]
    root = _write_submission(tmp_path, _payload(benchmarks=benches), {"aime": "", "gpqa": ""})
    aime, gpqa = resolve(root).benchmarks
    assert aime.first_job_id is None and "Invalid account" in (aime.sbatch_error or "")
    assert gpqa.first_job_id == "4243" and gpqa.sbatch_error is None


def test_a_record_of_a_newer_schema_is_read_with_a_note(tmp_path):
    root = _write_submission(tmp_path, _payload(schema_version=2, new_field=1), {"aime": ""})
    assert any("newer Gym" in n for n in resolve(root).notes)


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON (line 1)"),
    ("[1, 2]", "a JSON list, not an object"),
    ('{"gym_job_id": "x"}', "`benchmarks` is not a list"),
    ('{"benchmarks": []}', "no gym_job_id"),
])
def test_a_bad_record_file_is_one_line_naming_the_file(tmp_path, text, words):
    bad = tmp_path / "gym-job.json"
    bad.write_text(text)
    with pytest.raises(SubmissionError) as e:
        resolve(bad)
    assert str(e.value).startswith(str(bad)) and words in str(e.value) and "\n" not in str(e.value)


def test_a_dir_that_is_no_submission_says_so_naming_it(tmp_path):
    with pytest.raises(SubmissionError) as e:
        resolve(tmp_path)
    assert str(tmp_path) in str(e.value) and "not a Gym submission" in str(e.value)


def test_a_missing_path_says_so(tmp_path):
    with pytest.raises(SubmissionError, match="no such file"):
        resolve(tmp_path / "nope" / "gone")


def test_before_gym_writes_the_manifest_the_benchmark_dirs_are_read(tmp_path):
    root = tmp_path / "gym-job-20261207T100000Z-abcdef"
    (root / "aime").mkdir(parents=True)
    (root / "aime" / "job.sh").write_text("#!/bin/bash\n")
    (root / "aime" / "slurm-77.out").write_text("")
    (root / "aime" / "slurm-78.out").write_text("")
    sub = resolve(root / "aime")
    assert sub.record is None and sub.focus == "aime"
    assert [(b.name, b.first_job_id, b.local_dir) for b in sub.benchmarks] == [("aime", "77", root / "aime")]
    assert any("Gym writes it last" in n for n in sub.notes)


def test_before_the_manifest_the_index_copy_is_read_when_this_machine_has_it(tmp_path):
    index, gym_job_id = _index_with(tmp_path, "real_mcqa_cold")
    root = tmp_path / "runs" / gym_job_id
    shutil.copytree(submission_dir("real_mcqa_cold"), root)
    (root / "gym-job.json").unlink()
    sub = resolve(root, index=index)
    assert sub.record == index / f"{gym_job_id}.json" and sub.benchmarks[0].first_job_id == "17"
    assert sub.benchmarks[0].local_dir == root / "mcqa"


def test_a_half_written_manifest_falls_back_to_the_benchmark_dirs_with_a_note(tmp_path):
    root = tmp_path / "gym-job-20261207T100000Z-abcdef"
    (root / "aime").mkdir(parents=True)
    (root / "aime" / "job.sh").write_text("")
    (root / "gym-job.json").write_text('{"gym_job_id": "gym-job-2026')
    sub = resolve(root)
    assert [b.name for b in sub.benchmarks] == ["aime"]
    assert any("not valid JSON" in n for n in sub.notes)


def test_a_lone_job_dir_copied_without_its_submission(tmp_path):
    job = tmp_path / "copied" / "aime"
    job.mkdir(parents=True)
    (job / "job.sh").write_text("")
    (job / ".gym_job_chain").write_text("31\n32\n")
    sub = resolve(job)
    assert [(b.name, b.first_job_id) for b in sub.benchmarks] == [("aime", "31")] and sub.focus == "aime"
