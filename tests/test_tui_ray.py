"""`gymwatch attach --ray URL` (Pilot): the summary says the Ray cluster's nodes and how many are
dead, the board marks the service step on the dead node, and enter on its row shows Ray's answer
as the row's evidence (never as markup). The run: the recorded submission `completed` 20 s in
(job 101 running on vm, its service `policy` healthy), Slurm faked, Ray's recorded answers served
on loopback (its worker node named vm)."""

from __future__ import annotations

from gymwatch.core.model import FAILED
from gymwatch.tui.live import LiveRun
from gymwatch.tui.logscreens import LineScreen
from test_cluster_ray import dashboard
from test_ray_marks import HEARTBEATS, answers
from test_report_ray import running_on_vm
from tuihelpers import FakeClock, make_app, screen_lines, wait_for

WIDE = (200, 50)


async def test_a_dead_node_in_the_summary_and_on_the_row_of_its_service(tmp_path, monkeypatch):
    root, _ = running_on_vm(tmp_path, monkeypatch)
    dead = answers("dead_node", {"node_ip": "192.0.2.3", "node_name": "vm",
                                 "state_message": "[red]gone[/red] " + HEARTBEATS})
    with dashboard(dead) as (url, _):
        clock = FakeClock()
        app = make_app(LiveRun(str(root / "mcqa"), clock=clock, check_processes=False, ray=url), clock)
        async with app.run_test(size=WIDE) as pilot:
            def marked() -> bool:
                app.hints.put_nowait("tick")      # a poll: it takes the feed's answer once it came
                s = app.live.state.servers.get("policy") if app.live.state else None
                return s is not None and s.state == FAILED
            assert await wait_for(pilot, marked)
            await pilot.pause(0.1)
            text = "\n".join(screen_lines(app))
            assert "Ray: 2 nodes, 1 dead" in text
            assert f"its node vm (192.0.2.3) is dead in Ray: [red]gone[/red] {HEARTBEATS}" in text
            board = app.main.board
            board.focus()
            while board.server_at_cursor() != "policy":
                await pilot.press("down")
            await pilot.press("enter")
            assert await wait_for(pilot, lambda: isinstance(app.screen, LineScreen))
            shown = "\n".join(screen_lines(app))
            assert f"{url}/api/v0/nodes:2 (Ray's answer at " in shown
            assert f"node vm (192.0.2.3) DEAD: [red]gone[/red] {HEARTBEATS}" in shown
            await pilot.press("escape")
            assert await wait_for(pilot, lambda: not isinstance(app.screen, LineScreen))
            await pilot.press("exclamation_mark")        # the verdict's evidence: the same answer
            assert await wait_for(pilot, lambda: isinstance(app.screen, LineScreen))
            assert f"{url}/api/v0/nodes:2 (Ray's answer at " in "\n".join(screen_lines(app))


async def test_without_ray_the_summary_says_nothing_of_it(tmp_path, monkeypatch):
    root, _ = running_on_vm(tmp_path, monkeypatch)
    clock = FakeClock()
    app = make_app(LiveRun(str(root / "mcqa"), clock=clock, check_processes=False), clock)
    async with app.run_test(size=WIDE) as pilot:
        assert await wait_for(pilot, lambda: app.run_shown)
        assert "Ray:" not in "\n".join(screen_lines(app))
