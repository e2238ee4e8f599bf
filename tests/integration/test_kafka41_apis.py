"""APIs moldau added for Kafka 4.1 compatibility: DescribeTopicPartitions (75), ListConfigResources (74),
AlterReplicaLogDirs (34, with DescribeLogDirs' future replicas), driven by kafka-python 3.0's KafkaAdminClient
and by raw requests (kafka-python's protocol classes on a plain socket) where a test needs the exact fields
(empty ELR lists, INVALID_REQUEST, paging from a cursor)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from harness.brokerproc import BrokerProcess
from harness.kafkautil import create_topic, produce_confluent, read_all_confluent, unique_topic
from harness.rawkafka import RawConnection

pytestmark = pytest.mark.moldau_only(reason="moldau's own Kafka 4.1 API handlers")


@pytest.fixture(scope="module")
def kp_admin(broker):
    from kafka.admin import KafkaAdminClient

    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    yield a
    a.close()


def _dtp(bootstrap: str, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    from kafka.protocol.admin import DescribeTopicPartitionsRequest as Req
    from kafka.protocol.admin import DescribeTopicPartitionsResponse as Resp

    req = Req(topics=[Req.TopicRequest(name=n) for n in names], response_partition_limit=limit,
              cursor=None if cursor is None else Req.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    with RawConnection.to(bootstrap) as conn:
        return conn.call(req, Resp, 0)


def test_describe_topic_partitions_named(broker, make_topic, kp_admin):
    a = make_topic(partitions=3)
    b = make_topic(partitions=2)
    meta = {t["name"]: t for t in kp_admin.describe_topics([a, b])}
    out = kp_admin.describe_topic_partitions([b, a])
    assert out["next_cursor"] is None
    assert [t["name"] for t in out["topics"]] == sorted([a, b])  # answered in name order
    for t in out["topics"]:
        assert t["error_code"] == 0 and t["is_internal"] is False
        assert str(t["topic_id"]) == str(meta[t["name"]]["topic_id"])
        assert str(t["topic_id"]) != str(uuid.UUID(int=0))
        assert t["topic_authorized_operations"] > 0  # every topic operation: no authorizer
        want = {p["partition_index"]: p for p in meta[t["name"]]["partitions"]}
        assert sorted(p["partition_index"] for p in t["partitions"]) == sorted(want)
        for p in t["partitions"]:
            m = want[p["partition_index"]]
            assert p["error_code"] == 0
            assert (p["leader_id"], p["leader_epoch"]) == (m["leader_id"], m["leader_epoch"])
            assert p["replica_nodes"] == m["replica_nodes"] and p["isr_nodes"] == m["isr_nodes"]
            assert p["leader_id"] in p["replica_nodes"]

    raw = _dtp(broker.bootstrap, [a])
    (part0,) = [p for p in raw.topics[0].partitions if p.partition_index == 0]
    assert part0.eligible_leader_replicas == [] and part0.last_known_elr == []  # no ELR: empty, not null
    assert part0.offline_replicas == []


def test_describe_topic_partitions_errors(broker):
    missing = unique_topic("dtp-missing")
    raw = _dtp(broker.bootstrap, [missing, "bad name!"])
    codes = {t.name: t.error_code for t in raw.topics}
    assert codes == {missing: 3, "bad name!": 17}  # UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION
    # the zero topic id (kafka-python decodes it as None)
    assert all(t.topic_id in (None, uuid.UUID(int=0)) and t.partitions == [] for t in raw.topics), [
        (t.topic_id, t.partitions) for t in raw.topics]
    # a cursor naming a topic outside the requested list: INVALID_REQUEST for each topic named
    raw = _dtp(broker.bootstrap, [missing], cursor=(missing + "-other", 0))
    assert [(t.name, t.error_code) for t in raw.topics] == [(missing, 42)]


def test_describe_topic_partitions_paging(broker, make_topic):
    a = make_topic(partitions=3)
    b = a + "-b"  # sorts right after a
    create_topic(broker.bootstrap, b, 2)
    # limit 2: a[0,1] -> cursor a/2; then a[2] + b[0] -> cursor b/1; then b[1], no cursor
    seen: list[tuple[str, int]] = []
    cursors = []
    cursor = None
    for _ in range(5):
        raw = _dtp(broker.bootstrap, [b, a], limit=2, cursor=cursor)
        seen += [(t.name, p.partition_index) for t in raw.topics for p in t.partitions]
        if raw.next_cursor is None:
            break
        cursor = (raw.next_cursor.topic_name, raw.next_cursor.partition_index)
        cursors.append(cursor)
    assert cursors == [(a, 2), (b, 1)]
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
    # the limit used up exactly at a topic's end: the cursor names the next topic's partition 0
    raw = _dtp(broker.bootstrap, [a, b], limit=3)
    assert [t.name for t in raw.topics] == [a]
    assert (raw.next_cursor.topic_name, raw.next_cursor.partition_index) == (b, 0)
    # listing every topic from a cursor: topics sorting before the cursor's are left out
    raw = _dtp(broker.bootstrap, [], limit=2000, cursor=(b, 1))
    assert raw.topics[0].name == b and [p.partition_index for p in raw.topics[0].partitions] == [1]
    assert all(t.name >= b for t in raw.topics) and raw.next_cursor is None


def test_list_config_resources(broker, make_topic, kp_admin):
    from kafka.protocol.admin import ListConfigResourcesRequest as Req
    from kafka.protocol.admin import ListConfigResourcesResponse as Resp

    t = make_topic(partitions=1)
    every = kp_admin.list_config_resources()
    assert t in every["topic"]
    assert every["broker"] and every["broker"] == every["broker_logger"]
    assert "client_metrics" not in every and "group" not in every  # moldau keeps no such configs
    assert kp_admin.list_config_resources(["TOPIC"]) == {"topic": every["topic"]}
    assert kp_admin.list_config_resources(["CLIENT_METRICS", "GROUP"]) == {}
    with RawConnection.to(broker.bootstrap) as conn:
        v0 = conn.call(Req(), Resp, 0)  # ListClientMetricsResources
        assert v0.error_code == 0 and v0.config_resources == []
        bad = conn.call(Req(resource_types=[2, 1]), Resp, 1)  # 1 is no config resource type
        assert bad.error_code == 35 and bad.config_resources == []  # UNSUPPORTED_VERSION, as Kafka


# ------------------------------------------------------------------------------------------------
# AlterReplicaLogDirs (34) with DescribeLogDirs (35): a broker with two log dirs


class TwoDirBroker(BrokerProcess):
    """A moldau broker whose ``log.dirs`` are its data dir and ``second``."""

    def __init__(self, base: Path, settings: dict[str, str]) -> None:
        super().__init__("moldau", base / "d1", settings=settings, log_dir=base)
        self.second = base / "d2"
        self.second.mkdir()

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--data-dir")
        cmd[i + 1] = f"{self.data_dir},{self.second}"
        return cmd


def _replicas(admin, topic: str) -> list[tuple[str, bool]]:
    """(log dir, is_future_key) of every replica of ``topic``-0 DescribeLogDirs lists."""
    out = []
    for d in admin.describe_log_dirs({topic: [0]})[0]["log_dirs"]:
        assert d["error_code"] == 0
        for t in d["topics"]:
            out += [(d["log_dir"], p["is_future_key"]) for p in t["partitions"] if t["name"] == topic]
    return sorted(out)


def _on_disk(b: TwoDirBroker, topic: str) -> list[str]:
    return sorted(f"{d.name}/{e.name}" for d in (b.data_dir, b.second) for e in d.iterdir()
                  if e.name.startswith(f"{topic}-0"))


@pytest.mark.single_broker("one broker's log dirs")
def test_alter_replica_log_dirs(tmp_path):
    from kafka.admin import KafkaAdminClient
    from kafka.errors import LogDirNotFoundError, NoError, ReplicaNotAvailableError
    from kafka.structs import TopicPartitionReplica

    # 1 MB/s: the 3 MB replica takes about 3 s to copy, long enough to see (and kill) the move under way
    b = TwoDirBroker(tmp_path, {"replica.alter.log.dirs.io.max.bytes.per.second": "1000000"})
    try:
        b.start()
        topic = unique_topic("move")
        create_topic(b.bootstrap, topic, 1)
        produce_confluent(b.bootstrap, topic, [{"value": b"v" * 1000, "partition": 0} for _ in range(3000)])
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        ((src, _),) = _replicas(a, topic)
        dest = str(b.second) if src == str(b.data_dir) else str(b.data_dir)
        node = a.describe_cluster()["controller_id"]  # the one broker
        tpr, missing = TopicPartitionReplica(topic, 0, node), TopicPartitionReplica(topic, 5, node)
        res = a.alter_replica_log_dirs({tpr: "/no/such/dir", missing: dest})
        assert res == {tpr: LogDirNotFoundError, missing: ReplicaNotAvailableError}

        assert a.alter_replica_log_dirs({tpr: dest}) == {tpr: NoError}
        deadline = time.monotonic() + 10
        while _replicas(a, topic) != sorted([(src, False), (dest, True)]):
            assert time.monotonic() < deadline, _replicas(a, topic)
            time.sleep(0.05)
        # the replica keeps serving while it is copied
        produce_confluent(b.bootstrap, topic, [{"value": b"w", "partition": 0} for _ in range(100)])
        assert _replicas(a, topic) == sorted([(src, False), (dest, True)])  # still under way
        a.close()
        b.kill9()  # mid-move
        b.start()
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        assert _replicas(a, topic) == [(src, False)]  # exactly one replica: the move is abandoned
        assert len(_on_disk(b, topic)) == 1
        assert len(read_all_confluent(b.bootstrap, topic, 1)) == 3100

        # a clean stop mid-move: the move is abandoned too
        assert a.alter_replica_log_dirs({tpr: dest}) == {tpr: NoError}
        deadline = time.monotonic() + 10
        while _replicas(a, topic) != sorted([(src, False), (dest, True)]):
            assert time.monotonic() < deadline, _replicas(a, topic)
            time.sleep(0.05)
        a.close()
        assert b.stop() == 0
        b.start()
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        assert _replicas(a, topic) == [(src, False)] and len(_on_disk(b, topic)) == 1

        assert a.alter_replica_log_dirs({tpr: dest}) == {tpr: NoError}
        deadline = time.monotonic() + 30
        while _replicas(a, topic) != [(dest, False)]:
            assert time.monotonic() < deadline, _replicas(a, topic)
            time.sleep(0.1)
        assert _on_disk(b, topic) == [f"{Path(dest).name}/{topic}-0"]
        produce_confluent(b.bootstrap, topic, [{"value": b"x", "partition": 0} for _ in range(10)])
        recs = read_all_confluent(b.bootstrap, topic, 1)
        assert [r.offset for r in recs] == list(range(3110))
        a.close()
        b.restart()  # the moved replica is found where it now lives, checkpoints and all
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
        assert _replicas(a, topic) == [(dest, False)]
        assert [r.offset for r in read_all_confluent(b.bootstrap, topic, 1)] == list(range(3110))
        a.close()
    finally:
        b.close()
