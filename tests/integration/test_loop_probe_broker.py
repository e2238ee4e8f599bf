"""A ``moldau broker`` process freezes what start-up made out of the cyclic GC, and reports loop stalls when
``MOLDAU_LOOP_PROBE`` is set (the probe's first line gives the number of frozen objects, its last the
summary at shutdown)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Producer

from harness.brokerproc import BrokerProcess

pytestmark = [
    pytest.mark.moldau_only("moldau's own event-loop probe"),
    pytest.mark.single_broker("one broker process's log"),
]


def test_broker_freezes_startup_objects_and_reports_the_loop(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOLDAU_LOOP_PROBE", "1000")
    b = BrokerProcess("moldau", tmp_path / "data", log_dir=tmp_path).start()
    try:
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1"})
        for i in range(100):
            p.produce("probe-topic", b"v%d" % i)
        assert p.flush(30) == 0
    finally:
        b.stop()
    out = b.output()
    m = re.search(r"loop probe on: stalls over 1000\.0 ms are logged; (\d+) objects frozen", out)
    assert m, out
    assert int(m.group(1)) > 1000  # modules, codecs, the broker's services
    assert "loop probe: {" in out and "'gc2'" in out
