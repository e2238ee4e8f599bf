"""What every record format decodes to: one ``Record`` and the timestamp types. Shared by the v2 codec
(``batch``) and the legacy message sets (``legacy``), which do not import each other's way round."""

from __future__ import annotations

from dataclasses import dataclass, field

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1


@dataclass(slots=True)
class Record:
    """One decoded record. ``headers`` is a list of (key, value-or-None)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
