"""Which of a run's servers Ray's answer speaks for (pure: the reducer's ray part applies it).

A server sits on a node: a service step on its Slurm job's nodes (Slurm's node list, or the host
its URL names), a Gym server on the host it said it listens on. Ray names a node by IP and
`node_name` (the IP unless it was started with `--node-name`); Slurm by hostname. So a node is
matched by either, case-insensitively, a hostname by its short form too, and an IP by the names
the feed resolved it to (reverse DNS, in the feed's thread: the reducer asks no one).

A model server's Ray actors are matched by name: Gym's local vLLM model server names the
placement groups of its data-parallel ranks `<server>_dp_rank_<n>` and puts its unnamed actors
(`LocalVLLMModelActor`, vLLM's `RayWorkerWrapper`) in them; a named actor holding the server's
name is its too. The longest server name that fits wins (`policy` and `policy_model`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from .ray import DEAD, RayActor, RayNode, RayState

NODES_PATH = "/api/v0/nodes"
ACTORS_PATH = "/api/v0/actors"
_LOCAL = ("localhost", "0.0.0.0", "::", "")


@dataclass(frozen=True)
class Mark:
    """What Ray says of one server: why it counts as failed, and the row of Ray's answer."""

    reason: str
    path: str           # the state API's endpoint the row is from (NODES_PATH, ACTORS_PATH)
    row: int            # 1-based, in that answer
    text: str           # the row in a line


def expand_nodelist(text: str) -> list[str]:
    """Slurm's node list in names: `gpu-[01-03,07],cpu1` -> gpu-01, gpu-02, gpu-03, gpu-07, cpu1."""
    names: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]*)\])?([^,\[]*)", text or ""):
        prefix, ranges, suffix = m.group(1).strip(), m.group(2), m.group(3).strip()
        if ranges is None:
            if prefix:
                names.append(prefix + suffix)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if hi and lo.isdigit() and hi.isdigit() and int(hi) - int(lo) < 10000:
                names += [f"{prefix}{i:0{len(lo)}d}{suffix}" for i in range(int(lo), int(hi) + 1)]
            elif lo:
                names.append(f"{prefix}{lo}{suffix}")
    return names


def host_of(url: Optional[str]) -> str:
    """The host a URL names (`http://gpu-01:8000/health` -> gpu-01); "" for a local one."""
    m = re.match(r"^(?:[a-z]+://)?\[?([^/\]]+?)\]?(?::\d+)?(?:/|$)", (url or "").strip(), re.I)
    host = m.group(1).lower() if m else ""
    return "" if host in _LOCAL or host.startswith("127.") else host


def keys(host: str) -> set[str]:
    """The forms a node's name is compared in: lower case, a hostname's short form too."""
    h = host.strip().lower()
    if not h:
        return set()
    if ":" in h or h.replace(".", "").isdigit():
        return {h}
    return {h, h.split(".")[0]}


def nodes_at(state: RayState, host: str, names: Mapping[str, Iterable[str]]) -> list[RayNode]:
    """Ray's nodes at `host` (a hostname, an IP or a node id); `names`: per IP, its hostnames."""
    want = keys(host)
    found = []
    for n in state.nodes:
        have = {n.node_id.lower()} | keys(n.ip) | keys(n.name)
        for alias in names.get(n.ip, ()):
            have |= keys(alias)
        if want & have:
            found.append(n)
    return found


def dead_node(state: RayState, hosts: Iterable[str], names: Mapping[str, Iterable[str]]) -> Optional[RayNode]:
    """The first of `hosts` Ray has lost: every Ray node there DEAD (a node that came back has a
    new id beside its dead one). None when Ray knows none of them dead."""
    for host in hosts:
        here = nodes_at(state, host, names)
        if here and not any(n.alive for n in here):
            return here[0]
    return None


def actor_owner(actor: RayActor, state: RayState, servers: Iterable[str]) -> Optional[str]:
    """The server an actor belongs to, by its name, its placement group's name, or its class."""
    groups = {pg.placement_group_id: pg.name for pg in state.placement_groups}
    said = [actor.name, groups.get(actor.placement_group_id, ""), actor.class_name]
    fits = [s for s in servers if s and any(s.lower() in w.lower() for w in said if w)]
    return max(fits, key=len) if fits else None


def node_words(node: RayNode) -> str:
    """A node as the row of Ray's answer says it."""
    name = node.name if node.name and node.name != node.ip else ""
    return (f"node {name} ({node.ip})" if name else f"node {node.ip or node.node_id[:12]}") + \
        f" {node.state}" + (f": {node.message}" if node.message else "")


def marks(state: RayState, placed: Mapping[str, list[str]], models: Iterable[str],
          names: Mapping[str, Iterable[str]]) -> dict[str, Mark]:
    """Per server, what Ray says against it: `placed`, each server's hosts as the run knows them;
    `models`, the model servers whose actors are looked for. A dead node first, then a dead actor."""
    if state.error:
        return {}
    out: dict[str, Mark] = {}
    rows = {n.node_id: i for i, n in enumerate(state.nodes, 1)}
    for server, hosts in placed.items():
        node = dead_node(state, hosts, names)
        if node is not None:
            m = _node_mark(node, rows[node.node_id], names)
            if len(hosts) > 1:      # a job of several nodes: which one the step runs on is not known
                m = Mark(m.reason.replace("its node", "a node of its job", 1), m.path, m.row, m.text)
            out[server] = m
    models = [m for m in models if m]
    for i, actor in enumerate(state.actors, 1):
        owner = actor_owner(actor, state, models) if actor.state == DEAD else None
        if owner is None or owner in out:
            continue
        node = state.node(actor.node_id)
        if node is not None and not node.alive:
            out[owner] = _node_mark(node, rows[node.node_id], names)
            continue
        who = actor.name or actor.class_name or actor.actor_id[:12]
        text = f"actor {who} ({actor.class_name}) DEAD" + (f": {actor.death}" if actor.death else "")
        out[owner] = Mark(f"its Ray actor {who} died: {actor.death or 'Ray gave no cause'}", ACTORS_PATH, i, text)
    return out


def _node_mark(node: RayNode, row: int, names: Mapping[str, Iterable[str]]) -> Mark:
    """A node by the name a person knows it by (its hostname), its IP beside it."""
    name = node.name if node.name and node.name != node.ip else next(iter(names.get(node.ip, ())), "")
    said = f"{name} ({node.ip})" if name and node.ip else name or node.ip or node.node_id[:12]
    return Mark(f"its node {said} is dead in Ray: {node.message or 'Ray gave no reason'}", NODES_PATH, row,
                node_words(node))
