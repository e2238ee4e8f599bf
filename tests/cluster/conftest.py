"""Cluster tests: a real ZooKeeper and three ``moldau broker`` processes on loopback (the fixtures are the
harness's, tests/harness/cluster.py)."""

from __future__ import annotations

from harness.cluster import cluster, cluster_factory, module_cluster  # noqa: F401 - fixtures of this directory
