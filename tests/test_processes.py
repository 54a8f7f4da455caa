"""Liveness of runs gymwatch did not launch, and a clean quit (no threads or children left)."""

import os
import pty
import re
import select
import subprocess
import sys
import time

import psutil
import pytest

from conftest import CASES
from gymwatch.core import procs
from gymwatch.core.session import RunSession
from gymwatch.core.verdict import verdict
from runbuilder import Run, rollout


@pytest.fixture
def fake_gym(tmp_path):
    """A `gym` executable that just sleeps: procs.scan must recognise it by its command line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gym = bin_dir / "gym"
    gym.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(60)\n")
    gym.chmod(0o755)
    started = []
    yield gym, started
    for p in started:
        p.kill()
        p.wait()


def test_a_live_collector_is_found_by_its_command_line(tmp_path, fake_gym):
    gym, started = fake_gym
    run = Run(tmp_path / "run")
    run.expect(2)
    run.rows("", rollout(0))
    for f in run.root.iterdir():          # it ended long ago: no process, its files quiet
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    s = RunSession.open(str(run.root))
    s.refresh_processes()
    s.poll()
    # not seen is not dead (it may run on another machine); quiet files and no process: ended
    assert s.state.collector.alive is None and verdict(s.state).name == "incomplete"
    assert "no output for 60 min and no gym process visible" in verdict(s.state).reason
    # relative --output, resolved against the process's cwd
    started.append(subprocess.Popen([str(gym), "eval", "run", "--no-serve", "--output", "rollouts.jsonl"],
                                    cwd=run.root))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        s.refresh_processes()
        if s.state.collector.alive:
            break
        time.sleep(0.1)
    s.poll()
    assert s.state.collector.alive is True and s.state.parent.alive is None     # no env start seen
    assert verdict(s.state).name == "collecting"


@pytest.mark.parametrize("where", ["proc", "psutil"])
def test_gym_processes_are_found_by_reading_proc_or_through_psutil(tmp_path, fake_gym, monkeypatch, where):
    gym, started = fake_gym
    if where == "psutil":                 # a machine with no /proc (macOS)
        monkeypatch.setattr(procs, "PROC", str(tmp_path / "no-proc"))
    started.append(subprocess.Popen([str(gym), "env", "start", "+x=a b"]))
    started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "gym"]))  # not gym
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(p.pid == started[0].pid for p, _, _ in procs.gym_processes()):
        time.sleep(0.1)
    found = {p.pid: (cmd, role) for p, cmd, role in procs.gym_processes()}
    assert found[started[0].pid] == ([sys.executable, str(gym), "env", "start", "+x=a b"], "env")
    assert started[1].pid not in found and os.getpid() not in found


def test_command_lines_read_from_proc_are_psutils():
    ours = dict(procs._command_lines())
    theirs = {p.info["pid"]: p.info["cmdline"] for p in psutil.process_iter(["pid", "cmdline"])}
    both = set(ours) & set(theirs)          # (processes come and go meanwhile)
    assert len(both) > 1 and all(ours[pid] == theirs[pid] for pid in both if theirs[pid])


@pytest.mark.parametrize("raw, args", [
    ("gym\0env\0start\0", ["gym", "env", "start"]),
    ("gym\0+x=a b\0\0", ["gym", "+x=a b", ""]),                    # an empty last argument
    ("ray::IDLE gym env start", ["ray::IDLE", "gym", "env", "start"]),   # retitled: spaces, no NUL
    ("ray::IDLE gym env\0", ["ray::IDLE", "gym", "env"]),               # retitled, NUL at the end
])
def test_a_command_line_is_split_as_psutil_splits_it(raw, args):
    assert procs._split_cmdline(raw) == args


def run_screen(args: list[str], keys: bytes | list[bytes] = b"q", settle: float = 3.0) -> tuple[int | None, list[int], str]:
    """Run a gymwatch screen in a pty, type `keys` (a list: one item at a time, 0.3 s apart), wait
    for it to exit: (exit code, None if it did not; children seen; the end of what it printed,
    escapes removed: a crash's traceback, or the screen it stayed on, for the failure message)."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40", TEXTUAL_ANIMATIONS="none",
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", "/tmp/gymwatch-test-cache"))
    proc = subprocess.Popen([sys.executable, "-m", "gymwatch", *args],
                            stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    os.set_blocking(master, False)
    out = bytearray()

    def drain() -> bool:
        try:
            out.extend(os.read(master, 65536))
        except BlockingIOError:
            pass
        except OSError:
            return False
        del out[:-65536]
        return True

    try:
        time.sleep(settle)
        kids = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        for i, burst in enumerate([keys] if isinstance(keys, bytes) else keys):
            if i:
                time.sleep(0.3)
            os.write(master, burst)
            drain()
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline and drain():
            time.sleep(0.05)
        code = proc.poll()                    # None: still running 20 s after the last key
        deadline = time.monotonic() + 2       # what it printed last
        while time.monotonic() < deadline and select.select([master], [], [], 0.2)[0] and drain():
            pass
        return code, kids, _plain(bytes(out))[-8000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def _plain(raw: bytes) -> str:
    """Terminal output as text: escape sequences dropped."""
    return re.sub(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-_])", "", raw.decode("utf-8", "replace"))


def test_attach_quits_cleanly_leaving_no_children():
    code, kids, out = run_screen(["attach", str(CASES / "aborted_500")])
    assert code == 0, out
    assert not [k for k in kids if psutil.pid_exists(k) and psutil.Process(k).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("command", ["attach", "browse"])
def test_q_typed_while_the_screen_starts_quits_it(command, tmp_path):
    """q typed before the screen is up (it sits in the terminal's input meanwhile) quits it: the
    browser's list was pushed once the app had started, and a q read before then was lost."""
    import shutil

    shutil.copytree(CASES / "some_never_ran", tmp_path / "runs" / "run")
    target = tmp_path / "runs" / ("run" if command == "attach" else "")
    code, _, out = run_screen([command, str(target)], keys=b"q", settle=0.05)
    assert code == 0, out


def test_attach_report_and_browse_never_write_into_the_run(tmp_path):
    import shutil

    from test_hardening import tree_hash

    root = tmp_path / "runs" / "run"
    shutil.copytree(CASES / "some_never_ran", root)
    before = tree_hash(tmp_path / "runs")
    # next failure, its card, the card's lines, the card closed, quit (one at a time: where a key
    # lands must not depend on how fast the screen is)
    code, _, out = run_screen(["attach", str(root)], keys=[b"]", b"\r", b"\t", b"\x1b", b"q"])
    assert code == 0, out
    code, _, out = run_screen(["browse", str(tmp_path / "runs")], keys=b"q")
    assert code == 0, out
    subprocess.run([sys.executable, "-m", "gymwatch", "report", str(root), "--format", "json"],
                   capture_output=True, timeout=60)
    subprocess.run([sys.executable, "-m", "gymwatch", "browse", str(tmp_path / "runs"), "--format", "json"],
                   capture_output=True, timeout=60)
    assert tree_hash(tmp_path / "runs") == before
