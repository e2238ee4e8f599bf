"""The stream reader's driver-side decisions, called directly (as PySpark's source runner does)."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from moldau.spark.reader import KafkaInputPartition, MoldauStreamReader, read_partition

from harness.spark_helpers import produce_values


def _reader(bootstrap, topic, **opts):
    return MoldauStreamReader({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **opts})


def _total(start, end):
    return sum(end[t][p] - start.get(t, {}).get(p, 0) for t in end for p in end[t])


def test_initial_offset_resolved_once_and_latest_offset_json(bootstrap, make_topic):
    topic = make_topic(2)
    produce_values(bootstrap, topic, 10, 2)
    r = _reader(bootstrap, topic)  # startingOffsets latest
    first = r.initialOffset()
    assert first == {topic: {"0": 5, "1": 5}}
    produce_values(bootstrap, topic, 10, 2, start=10)
    assert r.initialOffset() == first  # not resolved again
    end = r.latestOffset(first, ReadAllAvailable())
    assert json.dumps(end) == json.dumps({topic: {"0": 10, "1": 10}})
    assert r.latestOffset(end, ReadAllAvailable()) is end  # nothing new: the start itself
    assert r.reportLatestOffset() == end


def test_min_offsets_per_trigger_waits_then_max_trigger_delay_fires(bootstrap, make_topic):
    topic = make_topic(2)
    r = _reader(
        bootstrap, topic, startingOffsets="earliest", minOffsetsPerTrigger="100", maxTriggerDelay="1s"
    )
    assert r.getDefaultReadLimit() == ReadMinRows(100)
    start = r.initialOffset()
    produce_values(bootstrap, topic, 40, 2)
    assert r.latestOffset(start, ReadMinRows(100)) == start  # too few records: skip this trigger
    time.sleep(1.1)
    end = r.latestOffset(start, ReadMinRows(100))  # maxTriggerDelay passed: take what there is
    assert _total(start, end) == 40
    produce_values(bootstrap, topic, 150, 2, start=40)
    assert _total(end, r.latestOffset(end, ReadMinRows(100))) == 150


def test_max_rows_and_available_now_target(bootstrap, make_topic):
    topic = make_topic(3)
    produce_values(bootstrap, topic, 300, 3)
    r = _reader(bootstrap, topic, startingOffsets="earliest", maxOffsetsPerTrigger="70")
    assert r.getDefaultReadLimit() == ReadMaxRows(70)
    r.prepareForTriggerAvailableNow()
    produce_values(bootstrap, topic, 300, 3, start=300)  # after the target: not read by this run
    offset = r.initialOffset()
    sizes = []
    while True:
        nxt = r.latestOffset(offset, ReadMaxRows(70))
        if nxt == offset:
            break
        sizes.append(_total(offset, nxt))
        offset = nxt
    assert sizes == [70, 70, 70, 70, 20]
    assert offset == {topic: {"0": 100, "1": 100, "2": 100}}
    assert _total(offset, r.latestOffset(offset, ReadAllAvailable())) == 0  # the target caps ReadAll too


def test_partitions_split_and_executor_read_is_deterministic(bootstrap, make_topic):
    topic = make_topic(2)
    produce_values(bootstrap, topic, 1000, 2)
    r = _reader(bootstrap, topic, startingOffsets="earliest", minPartitions="4")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    parts = r.partitions(start, end)
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 250), (0, 250, 500), (1, 0, 250),
                                                              (1, 250, 500)]
    import pickle

    p = pickle.loads(pickle.dumps(parts[1]))  # as an executor gets it
    assert isinstance(p, KafkaInputPartition)
    once = [b.to_pydict() for b in read_partition(p)]
    again = [b.to_pydict() for b in read_partition(p)]
    assert once == again
    assert [o for b in once for o in b["offset"]] == list(range(250, 500))


@pytest.mark.moldau_only("DeleteRecords")
def test_task_reading_deleted_offsets_follows_fail_on_data_loss(bootstrap, make_topic):
    from confluent_kafka import TopicPartition as CTP

    from moldau.spark.kafka import DataLossError
    from moldau.spark.options import parse_source_options
    from moldau.spark.planning import OffsetRange

    from harness.kafkautil import admin

    topic = make_topic(1)
    produce_values(bootstrap, topic, 100, 1)
    ac = admin(bootstrap)
    for f in ac.delete_records([CTP(topic, 0, 60)]).values():
        f.result(30)

    def task(fail: str, start: int, end: int) -> KafkaInputPartition:
        o = parse_source_options(
            {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "failOnDataLoss": fail}, streaming=True
        )
        return KafkaInputPartition(0, OffsetRange(topic, 0, start, end), o)

    with pytest.raises(DataLossError, match="were deleted"):
        list(read_partition(task("true", 10, 80)))
    got = [o for b in read_partition(task("false", 10, 80)) for o in b.column("offset").to_pylist()]
    assert got == list(range(60, 80))
    assert list(read_partition(task("false", 10, 50))) == []  # everything of the range is gone
