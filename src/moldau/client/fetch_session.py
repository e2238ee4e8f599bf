"""Client side of incremental fetch sessions (KIP-227), sans-I/O: one ``FetchSessionHandler`` per broker.

A full fetch (session id 0, epoch 0) names every partition wanted and asks the broker to open a session; the
broker answers with a session id (0: it keeps none, e.g. its cache is full). Later fetches are incremental
(that session id, the next epoch): they name only partitions that are new or whose fetch offset, leader epoch
or byte limit changed since the last request, and list in ``forgotten`` the partitions of the session that
are no longer wanted (paused, unassigned, with a full prefetch buffer...). The broker answers only for
partitions with something new (records, a changed high watermark / log start offset, an error). Any
failure (a top-level error such as FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH, a lost
connection, an unreadable answer) drops the session: the next fetch is a full one again, which also closes
the stale session on the broker.

The state of each partition in the session is what the broker was last told: the broker updates a session
partition's fetch offset only from requests, so every partition whose fetch offset moved is in the next
incremental request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "FetchPlan", "FetchSessionHandler"]

INITIAL_EPOCH = 0  # a full fetch that opens a session
FINAL_EPOCH = -1  # a full fetch without a session (closes the one named)
_MAX_EPOCH = 2**31 - 1
_SESSION_ERRORS = frozenset({70, 71, 106})  # FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
#                                             FETCH_SESSION_TOPIC_ID_ERROR

# what the broker knows of one partition: (fetch offset, current leader epoch, partition max bytes)
PartitionFetch = tuple[int, int, int]
PartitionKey = tuple[str, int]  # (topic, partition)


@dataclass(slots=True)
class FetchPlan:
    """One Fetch request's session fields and partitions."""

    session_id: int
    epoch: int
    full: bool
    send: list[PartitionKey]  # partitions to name in the request (all of them for a full fetch)
    forgotten: list[PartitionKey]  # partitions to list in forgotten_topics_data
    wanted: dict[PartitionKey, PartitionFetch] = field(default_factory=dict)


class FetchSessionHandler:
    """The fetch session with one broker. ``build()`` before each Fetch, then exactly one of
    ``handle_response()`` / ``handle_error()`` for it (one Fetch in flight per broker)."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.partitions: dict[PartitionKey, PartitionFetch] = {}
        self._stale_session = 0  # a session to close with the next full fetch
        self.full_fetches = 0
        self.incremental_fetches = 0

    @property
    def active(self) -> bool:
        return self.session_id != 0

    def build(self, wanted: dict[PartitionKey, PartitionFetch]) -> FetchPlan:
        """The plan for a Fetch of ``wanted`` ({partition key: (fetch offset, leader epoch, max bytes)})."""
        if not self.session_id:
            sid, self._stale_session = self._stale_session, 0
            self.full_fetches += 1
            return FetchPlan(sid, INITIAL_EPOCH, True, list(wanted), [], dict(wanted))
        known = self.partitions
        send = [k for k, v in wanted.items() if known.get(k) != v]
        forgotten = [k for k in known if k not in wanted]
        self.incremental_fetches += 1
        return FetchPlan(self.session_id, self.epoch, False, send, forgotten, dict(wanted))

    def handle_response(self, plan: FetchPlan, error_code: int, session_id: int) -> None:
        """The broker answered ``plan``'s request (top-level ``error_code`` and ``session_id``)."""
        if error_code:
            self.handle_error()
            return
        if plan.full:
            self.session_id = session_id  # 0: the broker keeps no session; the next fetch is full again
            self.epoch = 1
        else:
            self.epoch = self.epoch + 1 if self.epoch < _MAX_EPOCH else 1
        self.partitions = plan.wanted if self.session_id else {}

    def handle_error(self) -> None:
        """The request failed (error answer, lost connection, timeout): start over with a full fetch."""
        if self.session_id:
            self._stale_session = self.session_id
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.partitions = {}

    @staticmethod
    def is_session_error(error_code: int) -> bool:
        return error_code in _SESSION_ERRORS
