"""The Ray cluster under a run whose services span nodes, read from its dashboard's state API.

Plain HTTP GETs (`urllib`, a timeout each) of `/api/v0/nodes`, `/api/v0/actors` and
`/api/v0/placement_groups` at the dashboard's URL (e.g. `http://head:8265`): no `ray` import, no
`ray.init`, so nothing is registered on the cluster. `read(url)` never raises: `RayState.error`
says why the dashboard could not be read. The answers' format (docs/gym-formats.md §12):
`{"result": true, "msg": "", "data": {"result": {"total": N, "num_after_truncation": M,
"result": [...]}}}`; `?detail=1` adds an actor's `death_cause` and a placement group's bundles.

Facts: each node (id, IP, name, alive or dead and why), each actor (class, name, state, node,
why it died), each placement group (name, state, the node of each bundle). Which rows of a run a
dead node or actor marks is core/cluster/raymarks.py's.
"""

from __future__ import annotations

import argparse
import json
import socket
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

TIMEOUT = 5.0          # seconds per request
LIMIT = 10000          # the most rows Ray's state API returns at once
ENDPOINTS = {"nodes": "/api/v0/nodes", "actors": "/api/v0/actors", "placement_groups": "/api/v0/placement_groups"}
DEAD = "DEAD"


@dataclass(frozen=True)
class RayNode:
    node_id: str
    ip: str
    name: str                     # Ray's node name: the IP unless the node was started with --node-name
    state: str                    # ALIVE, DEAD
    is_head: bool = False
    message: str = ""             # why it is dead, in Ray's words

    @property
    def alive(self) -> bool:
        return self.state != DEAD


@dataclass(frozen=True)
class RayActor:
    actor_id: str
    class_name: str
    name: str                     # "" for an unnamed actor
    state: str                    # DEPENDENCIES_UNREADY, PENDING_CREATION, ALIVE, RESTARTING, DEAD
    node_id: str
    pid: Optional[int] = None
    placement_group_id: str = ""
    death: str = ""               # why it died, in Ray's words ("" when alive)


@dataclass(frozen=True)
class RayPlacementGroup:
    placement_group_id: str
    name: str
    state: str                    # PENDING, CREATED, REMOVED, RESCHEDULING
    bundle_nodes: tuple[str, ...] = ()   # each bundle's node id, "" for a bundle not placed


@dataclass(frozen=True)
class RayState:
    url: str
    nodes: tuple[RayNode, ...] = ()
    actors: tuple[RayActor, ...] = ()
    placement_groups: tuple[RayPlacementGroup, ...] = ()
    error: str = ""                                   # why the dashboard could not be read
    notes: tuple[str, ...] = field(default=())        # answers cut short, Ray's own warnings

    def node(self, node_id: str) -> Optional[RayNode]:
        return next((n for n in self.nodes if n.node_id == node_id), None)

    @property
    def dead_nodes(self) -> tuple[RayNode, ...]:
        return tuple(n for n in self.nodes if not n.alive)

    def actors_on(self, node_id: str) -> tuple[RayActor, ...]:
        return tuple(a for a in self.actors if a.node_id == node_id)


Opener = Callable[[str, float], bytes]


def fetch(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def url_option(text: str) -> str:
    """`--ray URL` on a command line (argparse's type): the dashboard's base URL, or why not."""
    try:
        return base_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def base_url(url: str) -> str:
    """The dashboard's base URL: a scheme added when missing (`head:8265`), no trailing `/`.
    Raises ValueError when it is no http(s) URL with a host."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not a Ray dashboard URL (http://HOST:PORT): {url!r}")
    try:
        _ = parts.port      # urlsplit checks the port only when it is read
    except ValueError:
        raise ValueError(f"not a Ray dashboard URL (a bad port): {url!r}") from None
    return text.rstrip("/")


def read(url: str, *, timeout: float = TIMEOUT, opener: Opener = fetch) -> RayState:
    """The nodes, actors and placement groups the dashboard at `url` knows. Never raises."""
    try:
        base = base_url(url)
    except ValueError as e:
        return RayState(url=url, error=str(e))
    rows: dict[str, list[dict]] = {}
    notes: list[str] = []
    for what, path in ENDPOINTS.items():
        got = _get(base, path, timeout, opener)
        if isinstance(got, str):
            return RayState(url=base, error=got)
        rows[what], note = got
        notes += [f"{what}: {n}" for n in note]
    return RayState(url=base, nodes=tuple(_node(r) for r in rows["nodes"]),
                    actors=tuple(_actor(r) for r in rows["actors"]),
                    placement_groups=tuple(_placement_group(r) for r in rows["placement_groups"]),
                    notes=tuple(notes))


def _get(base: str, path: str, timeout: float, opener: Opener) -> tuple[list[dict], list[str]] | str:
    """(rows, notes) of one endpoint, or a one-line error."""
    url = f"{base}{path}?limit={LIMIT}&detail=1"
    try:
        raw = opener(url, timeout)
    except urllib.error.HTTPError as e:
        return f"the Ray dashboard at {base} answered HTTP {e.code} to {path}" + (
            " (a Ray older than 2.0 has no state API)" if e.code == 404 else "")
    except urllib.error.URLError as e:
        return f"cannot reach the Ray dashboard at {base}: {_reason(e.reason)}"
    except (OSError, ValueError) as e:        # a timeout while reading, a connection reset, ...
        return f"cannot reach the Ray dashboard at {base}: {_reason(e)}"
    try:
        payload = json.loads(raw)
    except ValueError:
        return f"{base}{path} did not answer JSON: is it Ray's dashboard?"
    return parse(payload, f"{base}{path}")


def parse(payload: Any, where: str = "") -> tuple[list[dict], list[str]] | str:
    """The rows of one state-API answer and notes on it, or a one-line error."""
    if not isinstance(payload, dict):
        return f"{where}: not an answer of Ray's state API"
    if payload.get("result") is False:
        return f"{where}: Ray said: {payload.get('msg') or 'no reason given'}"
    body = (payload.get("data") or {}).get("result") if isinstance(payload.get("data"), dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("result"), list):
        return f"{where}: not an answer of Ray's state API"
    rows = [r for r in body["result"] if isinstance(r, dict)]
    notes = []
    total, kept = body.get("total"), body.get("num_after_truncation")
    if isinstance(total, int) and isinstance(kept, int) and kept < total:
        notes.append(f"{kept} of {total} shown (Ray's limit)")
    for warning in (body.get("partial_failure_warning"), *(body.get("warnings") or ())):
        if isinstance(warning, str) and warning.strip():
            notes.append(warning.strip().splitlines()[0])
    return rows, notes


def _node(row: dict) -> RayNode:
    return RayNode(node_id=_s(row.get("node_id")), ip=_s(row.get("node_ip")), name=_s(row.get("node_name")),
                   state=_s(row.get("state")), is_head=row.get("is_head_node") is True,
                   message=_s(row.get("state_message")))


def _actor(row: dict) -> RayActor:
    pid = row.get("pid")
    return RayActor(actor_id=_s(row.get("actor_id")), class_name=_class(_s(row.get("class_name"))),
                    name=_s(row.get("name")), state=_s(row.get("state")), node_id=_s(row.get("node_id")),
                    pid=pid if isinstance(pid, int) and pid > 0 else None,
                    placement_group_id=_s(row.get("placement_group_id")), death=_death(row.get("death_cause")))


def _placement_group(row: dict) -> RayPlacementGroup:
    bundles = row.get("bundles")
    if not isinstance(bundles, list):
        bundles = []
    return RayPlacementGroup(placement_group_id=_s(row.get("placement_group_id")), name=_s(row.get("name")),
                             state=_s(row.get("state")),
                             bundle_nodes=tuple(_s(b.get("node_id")) for b in bundles if isinstance(b, dict)))


def _death(cause: Any) -> str:
    """Ray's `death_cause`: the error message of whichever context it holds, first line."""
    if not isinstance(cause, dict):
        return ""
    for context in cause.values():
        if isinstance(context, dict):
            text = _s(context.get("error_message")) or _s(context.get("reason"))
            if text:
                return text.strip().splitlines()[0]
    return ""


def _class(name: str) -> str:
    """`module.<locals>.RayWorkerWrapper` -> RayWorkerWrapper (the name a person knows)."""
    return name.rsplit(".", 1)[-1] if name else ""


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _reason(reason: Any) -> str:
    if isinstance(reason, socket.timeout) or isinstance(reason, TimeoutError):
        return "no answer in time"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


def summary(state: RayState) -> list[str]:
    """The cluster in a few lines: its nodes (the dead ones named, with Ray's reason), the actors
    not alive, the placement groups not created."""
    if state.error:
        return [f"Ray: {state.error}"]
    dead = state.dead_nodes
    lines = [f"Ray at {state.url}: {len(state.nodes)} node(s), {len(dead)} dead; "
             f"{len(state.actors)} actor(s), {len(state.placement_groups)} placement group(s)"]
    for n in dead:
        lines.append(f"  node {n.name or n.ip} ({n.node_id[:12]}) DEAD" + (f": {n.message}" if n.message else ""))
    for a in state.actors:
        if a.state != "ALIVE":
            who = a.name or a.class_name or a.actor_id[:12]
            where = state.node(a.node_id)
            lines.append(f"  actor {who} ({a.class_name}) {a.state}"
                         + (f" on node {where.name or where.ip}" if where else "")
                         + (f": {a.death}" if a.death else ""))
    for pg in state.placement_groups:
        if pg.state != "CREATED":
            unplaced = sum(1 for b in pg.bundle_nodes if not b)
            lines.append(f"  placement group {pg.name or pg.placement_group_id[:12]} {pg.state}"
                         + (f": {unplaced} of {len(pg.bundle_nodes)} bundle(s) not placed" if unplaced else ""))
    lines += [f"  note: {n}" for n in state.notes]
    return lines


def to_json(state: RayState) -> dict[str, Any]:
    """The facts as plain JSON (the report's `ray` key)."""
    out = asdict(state)
    for node, fact in zip(out["nodes"], state.nodes, strict=True):
        node["alive"] = fact.alive
    return out
