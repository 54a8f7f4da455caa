"""`gymwatch serve`: the live screen in a real headless browser (Debian's chromium, installed by
`make test` through .ci/install_chromium.sh), the page usable on a closed network and behind a
tunnel, loopback by default with a warning beyond it."""

from __future__ import annotations

import argparse
import socket
import urllib.request
from pathlib import Path

import pytest

from conftest import CASES
from headless_browser import Browser, colour_share, serving

from gymwatch import serve as serve_mod

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
