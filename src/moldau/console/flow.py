"""The data-flow page: which producers write which topics and which consumer groups read them, laid out in
three columns (producers, topics, groups) and drawn as SVG on the server (no script; every label is escaped
by the template).

Readers come from the groups' committed offsets (and assignments of active members); writers from
DescribeProducers (every producer with state on a partition: idempotent and transactional ones), named by
their transactional id where ListTransactions knows it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from . import extra
from .cluster import ClusterView
from .sampler import Sampler
from .web import CLUSTER_ERRORS

log = logging.getLogger(__name__)

MAX_NODES = 60  # per column; the page says how many were left out
ROW_H, BOX_H, BOX_W, COL_X = 34, 24, 230, (20, 420, 820)


@dataclass(slots=True)
class Node:
    id: str
    label: str
    kind: str  # producer | topic | group
    href: str | None
    x: int = 0
    y: int = 0


@dataclass(slots=True)
class Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[Node, Node, str]] = field(default_factory=list)  # (from, to, "write" | "read")
    width: int = 1070
    height: int = 60
    left_out: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def path(self, a: Node, b: Node) -> str:
        x1, y1 = a.x + BOX_W, a.y + BOX_H // 2
        x2, y2 = b.x, b.y + BOX_H // 2
        mid = (x1 + x2) // 2
        return f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"


async def build_flow(view: ClusterView, sampler: Sampler) -> Graph:
    import urllib.parse

    def q(s: str) -> str:
        return urllib.parse.quote(s, safe="")

    g = Graph()
    snap = await view.snapshot()
    readers: dict[str, set[str]] = {}
    try:
        groups = [x.group_id for x in await view.list_groups()]
    except CLUSTER_ERRORS as e:
        groups = []
        g.errors.append(f"groups: {e}")
    for gid in groups[: MAX_NODES * 4]:
        try:
            committed = await view.committed(gid)
        except CLUSTER_ERRORS as e:
            log.debug("offsets of %s: %s", gid, e)
            continue
        topics = {tp.topic for tp in committed}
        if topics:
            readers[gid] = topics
    writers: dict[str, set[str]] = {}
    try:
        txns = await extra.transactions(view.admin)
    except CLUSTER_ERRORS as e:
        txns = []
        g.errors.append(f"transactions: {e}")
    names = {txn.producer_id: txn.transactional_id for txn in txns}
    for txn in txns:
        for topic, _p in txn.partitions or []:
            writers.setdefault(f"txn:{txn.transactional_id}", set()).add(topic)
    try:
        leaders = snap.leaders()
        for s in await extra.producers(view.admin, leaders):
            label = f"txn:{names[s.producer_id]}" if s.producer_id in names else f"pid:{s.producer_id}"
            writers.setdefault(label, set()).add(s.topic)
    except CLUSTER_ERRORS as e:
        g.errors.append(f"producers: {e}")

    used = sorted({t for ts in readers.values() for t in ts} | {t for ts in writers.values() for t in ts})
    cols: list[list[Node]] = [[], [], []]
    for label in sorted(writers)[:MAX_NODES]:
        text = ("transactional id " + label[4:]) if label.startswith("txn:") else ("producer id " + label[4:])
        cols[0].append(Node(label, text, "producer", "/transactions"))
    for t in used[:MAX_NODES]:
        cols[1].append(Node(f"topic:{t}", t, "topic", f"/topics/{q(t)}"))
    for gid in sorted(readers)[:MAX_NODES]:
        cols[2].append(Node(f"group:{gid}", gid, "group", f"/groups/{q(gid)}"))
    for kind, total, col in (
        ("producers", len(writers), cols[0]),
        ("topics", len(used), cols[1]),
        ("groups", len(readers), cols[2]),
    ):
        if total > len(col):
            g.left_out[kind] = total - len(col)
    by_id: dict[str, Node] = {}
    for i, col in enumerate(cols):
        for j, n in enumerate(col):
            n.x, n.y = COL_X[i], 30 + j * ROW_H
            by_id[n.id] = n
            g.nodes.append(n)
    for label, topics in writers.items():
        for t in topics:
            a, b = by_id.get(label), by_id.get(f"topic:{t}")
            if a and b:
                g.edges.append((a, b, "write"))
    for gid, topics in readers.items():
        for t in topics:
            a, b = by_id.get(f"topic:{t}"), by_id.get(f"group:{gid}")
            if a and b:
                g.edges.append((a, b, "read"))
    g.height = 40 + max((len(c) for c in cols), default=0) * ROW_H
    return g
