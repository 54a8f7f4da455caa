"""The watcher: network filesystems poll; one real watchfiles (native) test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import CASES
from gymwatch.tui.app import GymwatchApp
from gymwatch.tui.live import LiveRun
from gymwatch.tui.watch import fs_type, is_network_fs, needs_polling, watchfiles_source
from tuihelpers import wait_for


def test_network_filesystems_poll():
    for kind in ("nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "fuse.sshfs", "fuseblk"):
        assert is_network_fs(kind), kind
    for kind in ("ext4", "xfs", "overlay", "tmpfs", "btrfs", ""):
        assert not is_network_fs(kind), kind


def test_needs_polling_follows_the_mount(tmp_path: Path):
    kind = fs_type(tmp_path)
    assert isinstance(kind, str)
    assert needs_polling([tmp_path]) == is_network_fs(kind)


@pytest.mark.timeout(60)
async def test_real_watcher_sees_appended_rows(tmp_path: Path):
    run = tmp_path / "run"
    shutil.copytree(CASES / "mixed_ok", run, ignore=shutil.ignore_patterns("timeline.jsonl", "truth.json"))
    rows = (run / "rollouts.jsonl").read_bytes().splitlines(keepends=True)
    (run / "rollouts.jsonl").write_bytes(b"".join(rows[:3]))
    (run / "rollouts_aggregate_metrics.json").unlink()
    live = LiveRun(str(run), check_processes=False)
    app = GymwatchApp(live, change_source=watchfiles_source(force_polling=False), tick=3600,
                      animations=False)
    done = lambda: sum(1 for t in live.state.trials.values() if t.status == "completed")  # noqa: E731
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown and done() == 3)
        assert await wait_for(pilot, lambda: app.polls > 0)          # the watcher is armed
        with open(run / "rollouts.jsonl", "ab") as fh:
            before = app.polls
            fh.write(rows[3][:100])                                  # a partial line: held back
            fh.flush()
            assert await wait_for(pilot, lambda: app.polls > before, tries=500)
            assert done() == 3
            fh.write(rows[3][100:] + b"".join(rows[4:7]))
        assert await wait_for(pilot, lambda: done() == 7, tries=500)
        assert app.trials.cell(_key(rows[6]), "status").plain == "✓ completed"


def _key(raw: bytes) -> tuple:
    import json
    d = json.loads(raw)
    return (d["_ng_task_index"], d["_ng_rollout_index"])
