"""Kafka's command-line tools against moldau: the classes behind ``bin/kafka-*.sh`` run with ``java -cp`` on
the ``kafka`` module's jars (Apache Kafka of tests/jvm/pom.xml), their output asserted on. Every row of the
tools table in docs/compat.md is a test here.

The default run: kafka-topics.sh (TopicCommand) against the moldau broker. The whole matrix
(``MOLDAU_JVM_FULL=1``) runs every tool against moldau, the three-broker cluster and Apache Kafka.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from harness.brokerproc import BrokerProcess, ClusterProcess

# ACL commands need an authorizer; everyone may do everything as the anonymous super user
BROKER_SETTINGS = {
    "moldau": {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS",
               "allow.everyone.if.no.acl.found": "true"},
    "kafka": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "true"},
}
BROKER_SETTINGS["cluster"] = BROKER_SETTINGS["moldau"]

full = pytest.mark.jvm_full


def tool(main_class: str, *args: str, input: str | None = None, timeout: float = 120.0,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (a class of kafka-tools or the broker) to its end."""
    from harness import jvm

    known = main_class.startswith(("org.", "kafka."))
    cls = main_class if known else f"org.apache.kafka.tools.{main_class}"
    return jvm.run("kafka", cls, list(args), input=input, timeout=timeout, check=check, heap="256m")


def rf(b: BrokerProcess) -> str:
    return "3" if b.kind == "cluster" else "1"


def broker_ids(b: BrokerProcess) -> list[int]:
    from confluent_kafka.admin import AdminClient

    return sorted(AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=30).brokers)


def produce(b: BrokerProcess, topic: str, count: int, *, partition: int = 0, txn: str | None = None) -> None:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {"bootstrap.servers": b.bootstrap}
    if txn:
        conf["transactional.id"] = txn
    p = Producer(conf)
    if txn:
        p.init_transactions(30)
        p.begin_transaction()
    for i in range(count):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition)
    if txn:
        p.commit_transaction(30)
    assert p.flush(30) == 0


def test_kafka_topics_create_describe(target: BrokerProcess) -> None:
    """kafka-topics.sh: create (with a config) and describe (the default run's tool)."""
    bs = ["--bootstrap-server", target.bootstrap]
    t = f"tool-topics-{uuid.uuid4().hex[:8]}"
    out = tool("TopicCommand", *bs, "--create", "--topic", t, "--partitions", "2", "--replication-factor",
               rf(target), "--config", "retention.ms=7200000").stdout
    assert f"Created topic {t}." in out
    desc = tool("TopicCommand", *bs, "--describe", "--topic", t).stdout
    head = rf"Topic: {t}\s+TopicId: \S+\s+PartitionCount: 2\s+ReplicationFactor: {rf(target)}"
    assert re.search(head, desc) and "retention.ms=7200000" in desc, desc
    assert len(re.findall(r"Partition: \d+\s+Leader: \d+\s+Replicas: [\d,]+\s+Isr: [\d,]+", desc)) == 2, desc


@full
def test_kafka_topics_list_alter_delete(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-topics.sh: list, alter the partition count, delete."""
    bs = ["--bootstrap-server", target.bootstrap]
    t = jtopic(partitions=2)
    assert t in tool("TopicCommand", *bs, "--list").stdout.split()
    tool("TopicCommand", *bs, "--alter", "--topic", t, "--partitions", "3")
    assert "PartitionCount: 3" in tool("TopicCommand", *bs, "--describe", "--topic", t).stdout
    tool("TopicCommand", *bs, "--delete", "--topic", t)
    deadline = time.monotonic() + 30
    while t in tool("TopicCommand", *bs, "--list").stdout.split():
        assert time.monotonic() < deadline, f"{t} still listed after --delete"
        time.sleep(1)


@full
def test_kafka_console_producer_and_consumer(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-console-producer.sh with keys, kafka-console-consumer.sh printing them back in a group."""
    t = jtopic()
    bs = ["--bootstrap-server", target.bootstrap]
    lines = [f"key{i}:value {i}" for i in range(50)]
    tool("ConsoleProducer", *bs, "--topic", t, "--reader-property", "parse.key=true",
         "--reader-property", "key.separator=:", "--producer-property", "acks=all",
         input="\n".join(lines) + "\n")
    out = tool("consumer.ConsoleConsumer", *bs, "--topic", t, "--from-beginning", "--max-messages", "50",
               "--group", f"console-{uuid.uuid4().hex[:6]}", "--formatter-property", "print.key=true",
               "--formatter-property", "print.offset=true", "--timeout-ms", "60000").stdout
    got = [ln for ln in out.splitlines() if ln.startswith("Offset:")]
    assert got == [f"Offset:{i}\tkey{i}\tvalue {i}" for i in range(50)], out[-2000:]


@full
def test_kafka_consumer_groups(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-consumer-groups.sh: list, describe (offsets and lag), reset offsets, delete offsets, delete."""
    t = jtopic()
    produce(target, t, 20)
    group = f"cg-{uuid.uuid4().hex[:8]}"
    bs = ["--bootstrap-server", target.bootstrap]
    tool("consumer.ConsoleConsumer", *bs, "--topic", t, "--from-beginning", "--max-messages", "20",
         "--group", group, "--timeout-ms", "60000")
    cg = "consumer.group.ConsumerGroupCommand"
    assert group in tool(cg, *bs, "--list").stdout.split()
    desc = tool(cg, *bs, "--describe", "--group", group).stdout
    assert re.search(rf"{group}\s+{t}\s+0\s+20\s+20\s+0\b", desc), desc
    reset = tool(cg, *bs, "--reset-offsets", "--group", group, "--topic", t, "--to-offset", "5",
                 "--execute").stdout
    assert re.search(rf"{group}\s+{t}\s+0\s+5\b", reset), reset
    desc = tool(cg, *bs, "--describe", "--group", group).stdout
    assert re.search(rf"{group}\s+{t}\s+0\s+5\s+20\s+15\b", desc), desc
    state = tool(cg, *bs, "--describe", "--group", group, "--state").stdout
    assert re.search(rf"{group}\s+.*\s+Empty\s+0\b", state), state
    out = tool(cg, *bs, "--delete-offsets", "--group", group, "--topic", t).stdout
    assert re.search(rf"{t}\s+0\s+Successful", out), out
    out = tool(cg, *bs, "--delete", "--group", group).stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    assert group not in tool(cg, *bs, "--list").stdout.split()


@full
def test_kafka_configs(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-configs.sh: topic configs (add, describe, delete), broker configs, SCRAM users, client quotas."""
    t = jtopic()
    bs = ["--bootstrap-server", target.bootstrap]
    topic = ["--entity-type", "topics", "--entity-name", t]
    tool("ConfigCommand", *bs, "--alter", *topic, "--add-config",
         "retention.ms=12345,max.message.bytes=65536")
    out = tool("ConfigCommand", *bs, "--describe", *topic).stdout
    assert "retention.ms=12345" in out and "max.message.bytes=65536" in out, out
    tool("ConfigCommand", *bs, "--alter", *topic, "--delete-config", "retention.ms")
    out = tool("ConfigCommand", *bs, "--describe", *topic).stdout
    assert "retention.ms" not in out and "max.message.bytes=65536" in out, out
    bid = str(broker_ids(target)[0])
    out = tool("ConfigCommand", *bs, "--describe", "--entity-type", "brokers", "--entity-name", bid,
               "--all").stdout
    assert "log.retention.hours=" in out or "log.retention.ms=" in out, out[:2000]
    user = f"u{uuid.uuid4().hex[:6]}"
    tool("ConfigCommand", *bs, "--alter", "--entity-type", "users", "--entity-name", user,
         "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]")
    out = tool("ConfigCommand", *bs, "--describe", "--entity-type", "users", "--entity-name", user).stdout
    assert "SCRAM-SHA-256=iterations=8192" in out, out
    client = f"c{uuid.uuid4().hex[:6]}"
    tool("ConfigCommand", *bs, "--alter", "--entity-type", "clients", "--entity-name", client,
         "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    out = tool("ConfigCommand", *bs, "--describe", "--entity-type", "clients", "--entity-name", client).stdout
    assert "producer_byte_rate=1024.0" in out and "consumer_byte_rate=2048.0" in out, out


@full
def test_kafka_acls(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-acls.sh: add, list, remove."""
    t = jtopic()
    bs = ["--bootstrap-server", target.bootstrap]
    tool("AclCommand", *bs, "--add", "--allow-principal", "User:bob", "--operation", "Read",
         "--operation", "Describe", "--topic", t)
    out = tool("AclCommand", *bs, "--list", "--topic", t).stdout
    assert "principal=User:bob" in out and "operation=READ" in out and "operation=DESCRIBE" in out, out
    tool("AclCommand", *bs, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Read",
         "--topic", t)
    out = tool("AclCommand", *bs, "--list", "--topic", t).stdout
    assert "operation=READ" not in out and "operation=DESCRIBE" in out, out
    tool("AclCommand", *bs, "--remove", "--force", "--topic", t)
    assert "principal=User:bob" not in tool("AclCommand", *bs, "--list", "--topic", t).stdout


@full
def test_kafka_get_offsets(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-get-offsets.sh: latest, earliest and by timestamp."""
    t = jtopic(partitions=2)
    produce(target, t, 7, partition=0)
    produce(target, t, 3, partition=1)
    bs = ["--bootstrap-server", target.bootstrap]
    assert tool("GetOffsetShell", *bs, "--topic", t).stdout.split() == [f"{t}:0:7", f"{t}:1:3"]
    earliest = tool("GetOffsetShell", *bs, "--topic", t, "--time", "-2").stdout.split()
    assert earliest == [f"{t}:0:0", f"{t}:1:0"]
    out = tool("GetOffsetShell", *bs, "--topic-partitions", f"{t}:0", "--time", "-3").stdout.split()
    assert len(out) == 1 and out[0].startswith(f"{t}:0:") and 0 <= int(out[0].rsplit(":", 1)[1]) < 7, out


@full
def test_kafka_delete_records(target: BrokerProcess, jtopic: Callable[..., str], tmp_path: Path) -> None:
    """kafka-delete-records.sh: the low watermark moves, the earliest offset follows."""
    t = jtopic()
    produce(target, t, 10)
    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": t, "partition": 0, "offset": 4}]}))
    out = tool("DeleteRecordsCommand", "--bootstrap-server", target.bootstrap, "--offset-json-file",
               str(spec)).stdout
    assert re.search(rf"partition: {t}-0\s+low_watermark: 4", out), out
    assert tool("GetOffsetShell", "--bootstrap-server", target.bootstrap, "--topic", t, "--time",
                "-2").stdout.split() == [f"{t}:0:4"]


@full
def test_kafka_leader_election(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-leader-election.sh: a preferred election where the preferred replicas lead already."""
    t = jtopic(partitions=2)
    done = tool("LeaderElectionCommand", "--bootstrap-server", target.bootstrap, "--election-type",
                "preferred", "--topic", t, "--partition", "0", check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert f"Valid replica already elected for partitions {t}-0" in out or \
        f"Successfully completed leader election (PREFERRED) for partitions {t}-0" in out, out


@full
def test_kafka_reassign_partitions(target: BrokerProcess, tmp_path: Path) -> None:
    """kafka-reassign-partitions.sh: generate a plan, execute a move (to another broker where there is one),
    verify until complete; the topic's replicas are where the plan said."""
    from confluent_kafka.admin import AdminClient

    from harness.kafkautil import wait_for_topic

    ids = broker_ids(target)
    t = f"tool-reassign-{uuid.uuid4().hex[:8]}"
    bs = ["--bootstrap-server", target.bootstrap]
    # one replica, on the first broker (kafka-topics.sh --replica-assignment)
    tool("TopicCommand", *bs, "--create", "--topic", t, "--replica-assignment", str(ids[0]))
    a = AdminClient({"bootstrap.servers": target.bootstrap})
    wait_for_topic(target.bootstrap, t, 1, timeout=30, client=a)
    produce(target, t, 20)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": t}]}))
    out = tool("reassign.ReassignPartitionsCommand", *bs, "--generate", "--topics-to-move-json-file",
               str(topics), "--broker-list", ",".join(map(str, ids))).stdout
    assert "Current partition replica assignment" in out and "Proposed partition reassignment" in out, out
    dest = ids[-1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": 0, "replicas": [dest], "log_dirs": ["any"]}]}))
    out = tool("reassign.ReassignPartitionsCommand", *bs, "--execute", "--reassignment-json-file",
               str(plan)).stdout
    assert "Successfully started partition reassignment" in out or "Successfully started" in out, out
    deadline = time.monotonic() + 90
    while True:
        out = tool("reassign.ReassignPartitionsCommand", *bs, "--verify", "--reassignment-json-file",
                   str(plan)).stdout
        if f"Reassignment of partition {t}-0 is completed" in out:
            break
        assert time.monotonic() < deadline, out
        time.sleep(2)
    md = a.list_topics(t, timeout=30).topics[t].partitions[0]
    assert (md.replicas, md.leader) == ([dest], dest)


@full
def test_kafka_log_dirs(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-log-dirs.sh: every broker's log dirs as JSON, with the topic's replicas and their sizes."""
    t = jtopic()
    produce(target, t, 10)
    out = tool("LogDirsCommand", "--bootstrap-server", target.bootstrap, "--describe", "--topic-list",
               t).stdout
    doc = json.loads(next(ln for ln in out.splitlines() if ln.startswith("{")))
    assert sorted(b["broker"] for b in doc["brokers"]) == broker_ids(target)
    parts = [p for b in doc["brokers"] for d in b["logDirs"] for p in d["partitions"]]
    assert {p["partition"] for p in parts} == {f"{t}-0"} and len(parts) == int(rf(target))
    assert all(p["size"] > 0 for p in parts), parts


@full
def test_kafka_transactions(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-transactions.sh: list, describe, describe-producers, find-hanging."""
    t = jtopic()
    txn = f"tool-txn-{uuid.uuid4().hex[:8]}"
    produce(target, t, 5, txn=txn)
    bs = ["--bootstrap-server", target.bootstrap]
    out = tool("TransactionsCommand", *bs, "list").stdout
    assert re.search(rf"^{txn}\s+\d+\s+\d+\s+CompleteCommit\b", out, re.M), out
    out = tool("TransactionsCommand", *bs, "describe", "--transactional-id", txn).stdout
    assert re.search(r"CompleteCommit", out) and "ProducerId" in out, out
    out = tool("TransactionsCommand", *bs, "describe-producers", "--topic", t, "--partition", "0").stdout
    # ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence LastTimestamp CurrentTransactionStartOffset
    assert re.search(r"^\d+\s+\d+\s+-?\d+\s+4\s+\d+\s+None", out, re.M), out
    for bid in broker_ids(target):
        out = tool("TransactionsCommand", *bs, "find-hanging", "--broker-id", str(bid)).stdout
        # the table's header and no row
        assert out.split("\n", 1)[0].split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch",
                                                 "CoordinatorEpoch", "StartOffset", "LastTimestamp",
                                                 "Duration(min)"], out
        assert not out.split("\n", 1)[1].strip(), f"hanging transactions: {out}"


@full
def test_kafka_producer_and_consumer_perf_test(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh: every record sent, acknowledged, read."""
    t = jtopic(partitions=2)
    out = tool("ProducerPerformance", "--topic", t, "--num-records", "20000", "--record-size", "100",
               "--throughput", "-1", "--producer-props", f"bootstrap.servers={target.bootstrap}", "acks=all",
               timeout=240).stdout
    m = re.search(r"^20000 records sent, ([\d.]+) records/sec", out, re.M)
    assert m and float(m.group(1)) > 0, out[-2000:]
    out = tool("ConsumerPerformance", "--bootstrap-server", target.bootstrap, "--topic", t, "--messages",
               "20000", "--timeout", "60000", timeout=240).stdout
    rows = [ln.split(", ") for ln in out.splitlines() if re.match(r"^\d{4}-\d\d-\d\d", ln)]
    assert rows, out
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    assert int(rows[-1][4]) == 20000 and abs(float(rows[-1][2]) - 20000 * 100 / 1048576) < 0.01, rows


@full
def test_kafka_verifiable_producer_and_consumer(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-verifiable-producer.sh and kafka-verifiable-consumer.sh (the JSON events of Kafka's system
    tests): every record acknowledged once, consumed once, offsets committed."""
    from harness import jvm

    t = jtopic(partitions=2)
    out = tool("VerifiableProducer", "--bootstrap-server", target.bootstrap, "--topic", t, "--max-messages",
               "500", "--acks", "-1", timeout=180).stdout
    events = jvm.json_lines(out)
    acked = [e for e in events if e.get("name") == "producer_send_success"]
    assert len(acked) == 500 and not [e for e in events if e.get("name") == "producer_send_error"]
    data = [e for e in events if e.get("name") == "tool_data"]
    assert data and data[-1]["sent"] == 500 and data[-1]["acked"] == 500, data
    out = tool("VerifiableConsumer", "--bootstrap-server", target.bootstrap, "--topic", t, "--group-id",
               f"vc-{uuid.uuid4().hex[:6]}", "--max-messages", "500", timeout=180).stdout
    events = jvm.json_lines(out)
    consumed = [e for e in events if e.get("name") == "records_consumed"]
    assert sum(e["count"] for e in consumed) == 500, events[-5:]
    commits = [e for e in events if e.get("name") == "offsets_committed"]
    assert commits and all(e["success"] for e in commits), commits[-3:]
    final: dict[int, int] = {}
    for e in commits:
        for o in e["offsets"]:
            final[o["partition"]] = max(final.get(o["partition"], 0), o["offset"])
    ends: dict[int, int] = {}
    for e in acked:
        ends[e["partition"]] = max(ends.get(e["partition"], 0), e["offset"] + 1)
    assert final == ends and sum(final.values()) == 500, (final, ends)


def _partition_dir(b: BrokerProcess, topic: str) -> Path:
    roots = b.data_dirs if isinstance(b, ClusterProcess) else [b.data_dir]
    for root in roots:
        d = Path(root) / f"{topic}-0"
        if d.is_dir():
            return d
    raise AssertionError(f"no {topic}-0 under {roots}")


@full
def test_kafka_dump_log(target: BrokerProcess, jtopic: Callable[..., str]) -> None:
    """kafka-dump-log.sh on the broker's own segment files: the log's batches and records with their payloads,
    the offset index and the time index, which Kafka's tool reads as Kafka's own."""
    t = jtopic()
    produce(target, t, 30)
    time.sleep(1.0)  # the broker writes the batches to its segment file (no flush is needed to read it)
    d = _partition_dir(target, t)
    log = d / "00000000000000000000.log"
    out = tool("DumpLogSegments", "--files", str(log), "--print-data-log", "--deep-iteration").stdout
    assert f"Dumping {log}" in out, out[:1000]
    records = re.findall(r"\| offset: (\d+) .*?key: (\S+) payload: (\S+)", out)
    assert [(int(o), k, v) for o, k, v in records] == [(i, f"k{i}", f"v{i}") for i in range(30)], out[-2000:]
    assert re.search(r"^baseOffset: 0 lastOffset: \d+ count: \d+", out, re.M), out[:2000]
    assert "isValid: false" not in out and "CorruptRecordException" not in out
    for suffix in (".index", ".timeindex"):
        f = d / f"00000000000000000000{suffix}"
        assert f.exists(), f"no {f.name} beside the segment"
        done = tool("DumpLogSegments", "--files", str(f), "--verify-index-only", check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Mismatches in" not in done.stdout and "insane" not in done.stdout.lower(), done.stdout
