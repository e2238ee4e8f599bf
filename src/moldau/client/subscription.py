"""The consumer's subscription state and the narrow interface group membership drives it through.

``AsyncConsumer`` owns one ``SubscriptionState``: what it subscribed to (topics or a pattern) and the
partitions its group assigned. Group membership (``moldau.client.group``) reads the subscription to join and
heartbeat, marks the assignment lost when the group fenced the member, and changes the assignment only
through a ``RebalanceHandler``, which the consumer implements (listener callbacks, fetch positions,
auto-commit before a revocation). So membership never reaches into the consumer, and the two modules do not
import each other.
"""

from __future__ import annotations

import re
from typing import Protocol

from .cluster import Cluster
from .types import TopicPartition

__all__ = ["RebalanceHandler", "SubscriptionState"]


class SubscriptionState:
    """What the consumer subscribed to, and the partitions its group assigned it (Kafka's
    SubscriptionState, the group half of it)."""

    __slots__ = ("_cluster", "_exclude_internal", "topics", "pattern", "subscribed", "assignment",
                 "lost_pending")

    def __init__(self, cluster: Cluster, exclude_internal_topics: bool) -> None:
        self._cluster = cluster
        self._exclude_internal = exclude_internal_topics
        self.topics: set[str] = set()  # the explicit topics (empty with a pattern)
        self.pattern: re.Pattern[str] | None = None
        self.subscribed = False
        self.assignment: set[TopicPartition] = set()  # what the group assigned (and was not revoked)
        self.lost_pending = False  # the member was fenced: the assignment is lost before the next join

    def subscribe_topics(self, topics: set[str]) -> None:
        self.topics = set(topics)
        self.pattern = None
        self.subscribed = True

    def subscribe_pattern(self, pattern: re.Pattern[str]) -> None:
        self.topics = set()
        self.pattern = pattern
        self.subscribed = True

    def unsubscribe(self) -> None:
        self.topics = set()
        self.pattern = None
        self.subscribed = False

    def subscribed_topics(self) -> set[str]:
        """The topics subscribed to now (a pattern's: the matching topics of the current metadata)."""
        pattern = self.pattern
        if pattern is not None:
            exclude = self._exclude_internal
            return {t for t, md in self._cluster.topics.items()
                    if pattern.fullmatch(t) and not (exclude and md.is_internal)}
        return set(self.topics)

    def mark_lost(self) -> None:
        """The group fenced this member: its partitions are lost (given up without a commit)."""
        self.lost_pending = True

    def take_lost(self) -> bool:
        """Whether the assignment was marked lost since the last call (clears the mark)."""
        lost, self.lost_pending = self.lost_pending, False
        return lost


class RebalanceHandler(Protocol):
    """What group membership asks of the consumer when its assignment changes."""

    async def assign(self, assigned: list[TopicPartition], cooperative: bool) -> None:
        """The group's assignment for this member (all of it): revoke what is no longer in it, take the
        rest (the listener's revoked/assigned callbacks)."""

    async def revoke(self, partitions: set[TopicPartition], commit: bool) -> None:
        """Give up ``partitions`` (after committing the consumed offsets, with ``commit``)."""

    async def lose(self, partitions: set[TopicPartition]) -> None:
        """Drop ``partitions`` without committing (the listener's lost callback)."""
