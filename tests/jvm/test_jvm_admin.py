"""Kafka's Java Admin client against moldau: one run of ``AdminScenario`` per broker (topics, partitions,
configs, the cluster, log dirs, offsets, groups, records, transactions and producers, ACLs, SCRAM users,
quotas, leader election), each step its own test row. The default run takes the moldau broker; the whole
matrix (``MOLDAU_JVM_FULL=1``) adds the three-broker cluster and the Apache Kafka broker as the control.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from harness.brokerproc import BrokerProcess

# an authorizer is on (ACL requests need one) and lets everyone do everything, as the anonymous super user
BROKER_SETTINGS = {
    "moldau": {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS",
               "allow.everyone.if.no.acl.found": "true"},
    "kafka": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "true"},
}
BROKER_SETTINGS["cluster"] = BROKER_SETTINGS["moldau"]

RECORDS = 10


@pytest.fixture(scope="module")
def scenario(target: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Prepare a data topic written by a transactional Java producer and a group that consumed it, then run
    the whole scenario once; the steps' results by name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from harness import jvm
    from harness.kafkautil import wait_for_topic

    rf = 3 if target.kind == "cluster" else 1
    tag = uuid.uuid4().hex[:8]
    data, group, txn = f"admin-data-{tag}", f"admin-group-{tag}", f"admin-txn-{tag}"
    a = AdminClient({"bootstrap.servers": target.bootstrap})
    a.create_topics([NewTopic(data, num_partitions=1, replication_factor=rf)])[data].result(30)
    wait_for_topic(target.bootstrap, data, 1, timeout=30, client=a)
    del a
    base = ["--bootstrap", target.bootstrap]
    jvm.run("clients", "moldau.jvm.Produce", [*base, "--topic", data, "--count", str(RECORDS),
                                              "--transactional-id", txn], timeout=120)
    consumed = jvm.run("clients", "moldau.jvm.Consume", [*base, "--topic", data, "--group", group,
                                                         "--expect", str(RECORDS)], timeout=120)
    assert jvm.json_lines(consumed.stdout)[-1]["count"] == RECORDS
    out = jvm.run("clients", "moldau.jvm.AdminScenario",
                  [*base, "--topic", f"admin-new-{tag}", "--data-topic", data, "--group", group,
                   "--transactional-id", txn, "--rf", str(rf), "--user", f"user-{tag}"], timeout=300)
    steps = {e["step"]: e for e in jvm.json_lines(out.stdout) if "step" in e}
    steps["_brokers"] = {"count": rf, "kind": target.kind}
    return steps


def _ok(scenario: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    step = scenario.get(name)
    assert step is not None, f"step {name} did not run"
    assert step["ok"], f"{name}: {step.get('error')}"
    return step


def _brokers(scenario: dict[str, dict[str, Any]]) -> int:
    return int(scenario["_brokers"]["count"])


def check_create_topics(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["ok"] is True  # what it made is checked by the steps after it


def check_list_topics(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["present"] is True


def check_describe_topics(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert [p["partition"] for p in s["partitions"]] == [0, 1]
    assert all(p["leader"] >= 0 and p["replicas"] == _brokers(sc) and p["isr"] == _brokers(sc)
               for p in s["partitions"]), s
    assert s["topic_id"] and s["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"


def check_create_partitions(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert [p["partition"] for p in s["partitions"]] == [0, 1, 2, 3]
    assert all(p["leader"] >= 0 for p in s["partitions"])


def check_describe_configs(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s == {"step": "describe_configs", "ok": True, "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}


def check_incremental_alter_configs(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["cleanup.policy"] == {"value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert s["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"  # deleted: the broker's value again


def check_describe_cluster(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert len(s["nodes"]) == _brokers(sc)
    assert s["controller"] in s["nodes"] and s["cluster_id"]


def check_describe_broker_configs(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["count"] > 20 and s["num.partitions"]["value"] is not None


def check_describe_log_dirs(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["brokers"] == _brokers(sc) and s["dirs"] >= _brokers(sc)
    sizes = s["data_sizes"]
    assert len(sizes) == 1 and next(iter(sizes.values())) > 0, sizes


def check_list_offsets(s: dict[str, Any], sc: dict[str, Any]) -> None:
    # ten records and the transaction's commit marker
    assert (s["earliest"], s["latest"]) == (0, RECORDS + 1)
    # the commit marker, appended last, has the largest timestamp: Kafka 4.4.0 answers its offset too
    assert s["max_timestamp_offset"] == RECORDS


def check_list_groups(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["present"] is True


def check_describe_consumer_groups(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert (s["state"], s["members"], s["type"]) == ("Empty", 0, "Classic")


def check_list_consumer_group_offsets(s: dict[str, Any], sc: dict[str, Any]) -> None:
    # the consumer committed its position: past the last record, or past the marker too
    assert s["offsets"] in ({"0": RECORDS}, {"0": RECORDS + 1}), s


def check_alter_consumer_group_offsets(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["offsets"] == {"0": 1}


def check_delete_consumer_group_offsets(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["offsets"] == {}


def check_delete_records(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert (s["low_watermark"], s["earliest"]) == (2, 2)


def check_list_transactions(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["present"] is True and s["state"] == "CompleteCommit" and s["producer_id"] >= 0, s


def check_describe_transactions(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["state"] == "CompleteCommit"
    assert s["producer_id"] == sc["list_transactions"]["producer_id"]


def check_describe_producers(s: dict[str, Any], sc: dict[str, Any]) -> None:
    pid = sc["list_transactions"]["producer_id"]
    got = [(p["producer_id"], p["epoch"], p["last_sequence"]) for p in s["producers"]]
    if sc["_brokers"]["kind"] == "kafka":
        # transactions version 2 (KIP-890, Kafka 4's default): the commit marker bumps the producer's epoch
        # and the new epoch has written nothing yet
        assert got == [(pid, 1, -1)], s
    else:
        # moldau's transactions are version 1 (as Kafka 3): the epoch stays, the last sequence is the data's
        assert got == [(pid, 0, RECORDS - 1)], s


def check_fence_producers(s: dict[str, Any], sc: dict[str, Any]) -> None:
    before = sc["describe_transactions"]
    assert s["producer_id"] == before["producer_id"] and s["epoch"] > before["epoch"], (before, s)


def check_create_acls(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["bindings"] == 1


def check_delete_acls(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert (s["deleted"], s["left"]) == (1, 0)


def check_alter_scram_credentials(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["credentials"] == [{"mechanism": "SCRAM_SHA_256", "iterations": 8192}]


def check_delete_scram_credentials(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["credentials"] == []


def check_alter_client_quotas(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["quotas"] == {"producer_byte_rate": 1048576.0}


def check_remove_client_quotas(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["quotas"] == {}


def check_elect_leaders(s: dict[str, Any], sc: dict[str, Any]) -> None:
    # every replica is where it was put: the preferred leaders lead already
    assert set(s["partitions"].values()) <= {"not_needed", "elected"} and len(s["partitions"]) == 2, s


def check_delete_consumer_groups(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["present"] is False


def check_delete_topics(s: dict[str, Any], sc: dict[str, Any]) -> None:
    assert s["present"] is False


CHECKS: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    name[len("check_"):]: fn for name, fn in globals().items() if name.startswith("check_")
}


@pytest.mark.parametrize("step", list(CHECKS))
def test_admin_step(scenario: dict[str, dict[str, Any]], step: str) -> None:
    CHECKS[step](_ok(scenario, step), scenario)
