"""moldau perf produce/consume print their figures; the broker's Prometheus endpoint parses with the
Prometheus client's parser and its counters move with traffic."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from .test_cli_topics import cli, js, ok
from harness.brokerproc import BrokerProcess, free_port
from harness.kafkautil import unique_topic


def test_perf_produce_and_consume(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    name = unique_topic("cli-perf")
    ok(cli("topics", "create", name, "-p", "2", bootstrap=b))
    out = ok(cli("perf", "produce", name, "-n", "3000", "-s", "100", "--acks", "1", "--compression", "lz4",
                 bootstrap=b)).stdout
    assert out.startswith("3,000 records sent,") and "records/sec" in out and "MB/sec" in out
    for fig in ("ms avg latency", "ms max latency", "ms 50th", "ms 95th", "ms 99th", "ms 99.9th"):
        assert fig in out, (fig, out)
    s = js(
        cli("perf", "produce", name, "-n", "1000", "-s", "50", "--throughput", "2000", "--json", bootstrap=b)
    )
    assert s["records"] == 1000 and s["acknowledged"] == 1000 and s["errors"] == 0
    assert s["seconds"] >= 0.4  # the cap holds (1000 records at 2000/s)
    assert 0 < s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"] <= s["p99_9_ms"] <= s["max_ms"]
    assert s["records_per_sec"] > 0 and s["mb_per_sec"] > 0

    c = js(cli("perf", "consume", name, "-m", "4000", "--json", bootstrap=b))
    assert c["records"] == 4000 and c["bytes"] == 3000 * 100 + 1000 * 50
    assert c["records_per_sec"] > 0 and c["mb_per_sec"] > 0 and c["max_ms"] >= c["p50_ms"] >= 0
    out = ok(cli("perf", "consume", name, "-m", "100", bootstrap=b)).stdout
    assert "100 records consumed" in out and "records/sec" in out and "99.9th" in out
    p = cli("perf", "consume", name, "-m", "999999", "--timeout", "1", bootstrap=b)
    assert p.returncode == 1 and "only 4,000" not in p.stderr and "only 4000 of 999999" in p.stderr


def _scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    parser = pytest.importorskip("prometheus_client.parser")
    out = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.mark.moldau_only("moldau's metrics endpoint")
@pytest.mark.kafka_differs("moldau's own HTTP metrics endpoint (metrics.listener, Prometheus); Kafka's "
                           "broker has no such listener (its metrics are JMX)")
@pytest.mark.single_broker("one broker process's metrics endpoint (each broker of a cluster has its own, "
                           "tests/cluster/test_cluster_faults.py scrapes them)")
def test_metrics_endpoint(module_broker_factory: Callable[..., BrokerProcess]) -> None:
    mport = free_port()
    br = module_broker_factory(settings={"metrics.listener": f"127.0.0.1:{mport}"})
    b = br.bootstrap
    status, _body = _scrape(mport, "/health")
    assert status == 200
    status, _ = _scrape(mport, "/ready")
    assert status == 200
    assert _scrape(mport, "/nope")[0] == 404

    name = unique_topic("cli-metrics")
    group = unique_topic("cli-mg")
    ok(cli("topics", "create", name, "-p", "2", bootstrap=b))
    status, before_text = _scrape(mport)
    assert status == 200
    before = _samples(before_text)
    payload = b"".join(b"record-%03d\n" % i for i in range(50))
    ok(cli("produce", name, "-p", "0", "-q", input=payload, bootstrap=b))
    ok(cli("consume", name, "-g", group, "-p", "0", "--from-beginning", "-n", "20", bootstrap=b))
    status, text = _scrape(mport)
    after = _samples(text)
    t = (("topic", name),)

    def val(name_: str, labels: tuple[tuple[str, str], ...] = ()) -> Any:
        return after.get((name_, tuple(sorted(labels))))

    # counters (prometheus_client strips _total from family names but not from samples)
    assert val("kafka_server_brokertopicmetrics_messagesin_total", t) == 50
    bytes_in = val("kafka_server_brokertopicmetrics_bytesin_total", t)
    assert bytes_in >= len(payload)  # record batch bytes (headers included)
    assert val("kafka_server_brokertopicmetrics_bytesout_total", t) >= len(b"record-000") * 20
    produce_before = before.get(("kafka_network_requestmetrics_requests_total", (("request", "Produce"),)), 0)
    assert val("kafka_network_requestmetrics_requests_total", (("request", "Produce"),)) > produce_before
    assert val("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),)) >= 1
    assert (
        val("kafka_network_requestmetrics_totaltimems_bucket", (("request", "Produce"), ("le", "+Inf"))) >= 1
    )
    # gauges from the logs
    p0 = (("partition", "0"), ("topic", name))
    assert val("kafka_log_log_logendoffset", p0) == 50
    assert val("kafka_log_log_logstartoffset", p0) == 0
    assert val("kafka_log_log_size", p0) >= len(payload)
    assert val("kafka_log_log_logendoffset", (("partition", "1"), ("topic", name))) == 0
    assert val("kafka_server_replicamanager_partitioncount") >= 2
    # the group's committed offset and lag
    g = (("consumergroup", group), ("partition", "0"), ("topic", name))
    assert val("kafka_consumergroup_current_offset", g) == 20
    assert val("kafka_consumergroup_lag", g) == 30
    assert val("kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert val("process_resident_memory_bytes") > 0
    assert any(k[0] == "kafka_server_socketservermetrics_connection_count" for k in after)
    # a second round of traffic moves the counters again
    ok(cli("produce", name, "-p", "1", "-q", input=b"x\ny\n", bootstrap=b))
    again = _samples(_scrape(mport)[1])
    assert again[("kafka_server_brokertopicmetrics_messagesin_total", t)] == 52
    assert json.dumps(sorted(k[0] for k in again))  # every sample name is plain text
