"""`gymwatch serve`: the live screen in a real headless browser (Debian's chromium, installed by
`make test` through .ci/install_chromium.sh), the page usable on a closed network and behind a
tunnel, loopback by default with a warning beyond it; every screen it starts for a tab ends soon
after its tab goes away (in any phase of the screen's start), and when serve is stopped or killed;
what it prints."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from conftest import CASES
from gymwatch import serve as serve_mod
from headless_browser import Browser, Lid, Tab, colour_share, processes_naming, serving

VERDICT_RED = (244, 0, 95)      # the theme's red under "✗ COLLECTION ABORTED"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served():
    """`gymwatch serve` on the aborted_500 run, on a free loopback port; stopped by its group id."""
    with serving(CASES / "aborted_500") as (port, proc):
        yield port, proc


async def test_a_headless_browser_shows_the_board(served, tmp_path: Path):
    port, _ = served
    async with Browser(1400, 900) as browser:
        await browser.goto(f"http://127.0.0.1:{port}/?fontsize=14")
        assert await browser.wait_js("document.body.classList.contains('-first-byte')", timeout=60)
        png = await browser.settled_screenshot()
        (tmp_path / "serve.png").write_bytes(png)
        assert not await browser.js("document.body.classList.contains('-closed')")   # the session runs
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert colour_share(png, VERDICT_RED, tolerance=12) > 0.0005       # the verdict label is drawn
    assert colour_share(png, (0, 0, 0), tolerance=4) < 0.9             # and much more than a blank page


def test_the_page_needs_no_outside_network_and_follows_the_browsers_address(served):
    port, _ = served
    req = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Host": f"localhost:{port + 1}"})
    page = urllib.request.urlopen(req, timeout=10).read().decode()
    assert "googleapis" not in page and "RobotoMono-VariableFont_wght.ttf" in page
    assert f'data-session-websocket-url="ws://localhost:{port + 1}/ws"' in page      # an SSH tunnel's port
    assert "gymwatch aborted_500" in page


def test_loopback_by_default_and_a_warning_beyond_it(monkeypatch, capsys):
    from gymwatch.cli import _load_extras, build_parser

    _load_extras()
    args = build_parser().parse_args(["serve", str(CASES / "aborted_500")])
    assert (args.host, args.port) == ("127.0.0.1", 8000)
    assert serve_mod.is_loopback("127.0.0.1") and serve_mod.is_loopback("::1") and serve_mod.is_loopback("localhost")
    assert not serve_mod.is_loopback("0.0.0.0") and not serve_mod.is_loopback("10.1.2.3")
    assert serve_mod.exposure_warning("127.0.0.1", 8000) == ""

    started = []

    class NoServer:
        def serve(self):
            started.append(True)
    monkeypatch.setattr(serve_mod, "make_server", lambda a, url=None: NoServer())
    args = build_parser().parse_args(["serve", str(CASES / "aborted_500"), "--host", "0.0.0.0", "--port", "9"])
    assert args.func(args) == 0 and started
    err = capsys.readouterr().err
    assert "WARNING: listening on every interface, port 9, without a login" in err and "ssh -L 9:127.0.0.1:9" in err


def test_each_tab_runs_a_read_only_attach_with_the_path_quoted(tmp_path: Path):
    odd = tmp_path / "run; rm -rf ~ $(x)"
    args = argparse.Namespace(path=str(odd), logs=None, poll=True, head=None, no_notify=True)
    cmd = serve_mod.attach_command(args)
    assert "'" + str(odd) + "'" in cmd and "--on-quit leave" in cmd and cmd.endswith("--poll --no-notify")


def test_each_tab_asks_the_ray_dashboard_serve_was_given():
    from gymwatch.cli import _load_extras, build_parser

    _load_extras()
    args = build_parser().parse_args(["serve", str(CASES / "aborted_500"), "--ray", "head:8265/"])
    assert serve_mod.attach_argv(args)[-2:] == ["--ray", "http://head:8265"]


# --- every screen serve starts ends with its tab --------------------------------------------------

GONE_WITHIN = 10.0      # seconds: a tab's screen, once its connection is gone, or serve once stopped


@pytest.fixture
def run_copy(tmp_path: Path) -> Iterator[Path]:
    """The aborted_500 run under a path no other test uses: the processes naming it are this
    test's (the screens serve started for it, wherever they were re-parented)."""
    dst = tmp_path / f"run-{os.getpid()}-{time.monotonic_ns()}"
    shutil.copytree(CASES / "aborted_500", dst)
    yield dst
    for p in processes_naming(str(dst)):     # a test that failed early leaves none behind
        p.kill()


def screens_of(run: Path) -> list:
    """The screens (`gymwatch attach`) running on `run`; one that ends while looked at is not."""
    found = []
    for p in processes_naming(str(run)):
        try:
            if "attach" in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


async def first_screen(run: Path, timeout: float = 30) -> psutil.Process:
    """The screen process serve started for the tab just opened (polled: it starts at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = screens_of(run)
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError("serve started no screen for the tab")


async def wait_all_gone(run: Path, timeout: float = GONE_WITHIN) -> list:
    """Wait (bounded) until no process names the run; the ones left, with their state."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = screens_of(run)
        if not left:
            return []
        await asyncio.sleep(0.1)
    left = screens_of(run)
    described = [(p.pid, p.status(), p.cpu_percent(0.5), " ".join(p.cmdline())[:60]) for p in left]
    for p in left:       # ours: the test's own run path; gone before the next test
        p.kill()
    return described


async def drop_after_connect(tab: Tab, run: Path) -> None:
    """As soon as the tab's screen process exists; the page had sent its size twice (once on
    opening, once when its font had loaded), as chromium's --screenshot does."""
    await first_screen(run)
    await tab.resize(tab.size[0], tab.size[1] + 7)
    await tab.close()


async def drop_before_first_frame(tab: Tab, run: Path) -> None:
    """While the screen is starting (its process busy importing, nothing drawn yet)."""
    screen = await first_screen(run)
    deadline = time.monotonic() + 30
    while sum(screen.cpu_times()[:2]) < 0.15 and time.monotonic() < deadline:
        assert not await tab.pending_frame(), "the screen drew before the phase under test"
    await tab.resize(tab.size[0], tab.size[1] + 7)
    await tab.close()


async def drop_after_the_screen_is_up(tab: Tab, run: Path) -> None:
    assert await tab.read_until("ABORTED"), "the screen never drew the verdict"
    await tab.close()


@pytest.mark.parametrize("drop", [drop_after_connect, drop_before_first_frame, drop_after_the_screen_is_up],
                         ids=["right-after-connect", "before-the-first-frame", "after-the-screen-is-up"])
async def test_a_tab_that_goes_away_leaves_no_process(run_copy: Path, drop):
    with serving(run_copy) as (port, serve):
        tab = await Tab(port).open()
        try:
            await drop(tab, run_copy)
        finally:
            await tab.close()
        assert await wait_all_gone(run_copy) == []
        assert serve.poll() is None           # serve goes on serving
        again = await Tab(port).open()        # and a new tab still gets a screen
        assert await again.read_until("ABORTED")
        await again.close()


async def test_a_tab_that_goes_silent_is_closed_and_its_screen_ends(run_copy: Path):
    """A laptop lid closing (or a tunnel stalling): no FIN, the tab just stops answering. serve's
    pings go unanswered and it closes the tab; its screen ends."""
    with serving(run_copy) as (port, _):
        async with Lid(port) as lid:
            tab = await Tab(lid.port).open()
            assert await tab.read_until("ABORTED"), "the screen never drew the verdict"
            lid.close_lid()
            assert await wait_all_gone(run_copy, timeout=15) == []
            await tab.close()


async def test_a_screen_ends_on_sigterm_while_it_starts(run_copy: Path):
    """SIGTERM to a tab's screen (a user's `kill`, a job scheduler's) ends it in any phase: here
    once it has set up its own signal handling, with the page's two sizes waiting for it."""
    with serving(run_copy) as (port, _):
        tab = await Tab(port).open()
        screen = await first_screen(run_copy)
        await tab.resize(tab.size[0], tab.size[1] + 7)
        deadline = time.monotonic() + 30
        while screen.num_threads() < 2 and time.monotonic() < deadline:    # its input thread: started
            await asyncio.sleep(0.01)
        screen.send_signal(signal.SIGTERM)
        assert await wait_all_gone(run_copy) == []
        await tab.close()


@pytest.mark.parametrize("how", ["SIGTERM to serve", "Ctrl+C (SIGINT to its process group)"])
async def test_stopping_serve_ends_every_screen_it_started(run_copy: Path, how: str):
    """One tab with its screen up, one whose screen is still starting; serve ends both and itself."""
    with serving(run_copy) as (port, serve):
        up = await Tab(port).open()
        assert await up.read_until("ABORTED")
        starting = await Tab(port).open()
        deadline = time.monotonic() + 30
        while len(screens_of(run_copy)) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await starting.resize(starting.size[0], starting.size[1] + 7)
        screens = screens_of(run_copy)
        assert len(screens) == 2
        if how.startswith("SIGTERM"):
            os.kill(serve.pid, signal.SIGTERM)
        else:
            os.killpg(serve.pid, signal.SIGINT)
        deadline = time.monotonic() + GONE_WITHIN
        while serve.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        serve_ended = serve.poll() is not None
        left = await wait_all_gone(run_copy, timeout=1)
        for t in (up, starting):
            await t.close()
        assert serve_ended, "serve did not end"
        assert left == []


async def test_every_screen_ends_when_serve_is_killed(run_copy: Path):
    """serve killed outright (SIGKILL, the OOM killer): nothing of it runs any more, so each
    screen sees its input close and ends by itself."""
    with serving(run_copy) as (port, serve):
        tab = await Tab(port).open()
        assert await tab.read_until("ABORTED")
        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(10)
        assert await wait_all_gone(run_copy) == []
        await tab.close()


# --- what serve prints --------------------------------------------------------------------------

def test_serve_prints_its_address_and_errors_not_every_request(run_copy: Path):
    with serving(run_copy) as (port, serve):
        for path in ("/", "/", "/static/css/xterm.css", "/nothing-here"):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10).read()
            except urllib.error.HTTPError:
                pass
        time.sleep(0.5)
    out = "".join(serve.lines)
    start = [line for line in serve.lines if "gymwatch serve: the live screen of" in line]
    assert len(start) == 1 and f"http://127.0.0.1:{port} " in start[0], out    # one line, the URL whole
    assert "GET /" not in out and "HTTP/1.1" not in out, out


@pytest.mark.parametrize("host, loopback", [("0.0.0.0", "127.0.0.1"), ("::", "[::1]")])
def test_every_interface_prints_addresses_a_person_can_open(host: str, loopback: str):
    """Listening on every interface, the start message names this host and its loopback, never
    http://0.0.0.0 (which a browser elsewhere cannot open)."""
    from rich.console import Console

    args = argparse.Namespace(path=str(CASES / "aborted_500"), host=host, port=8123, logs=None, poll=False,
                              head=None, no_notify=False)
    server = serve_mod.make_server(args)
    server.console = Console(record=True, width=60, file=open(os.devnull, "w"))
    asyncio.run(server.on_startup(None))
    said = server.console.export_text()
    assert "0.0.0.0" not in said and "http://[::]" not in said, said
    assert f"http://{socket.gethostname()}:8123" in said and f"http://{loopback}:8123" in said, said
