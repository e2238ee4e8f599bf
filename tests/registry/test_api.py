"""Confluent's REST API on moldau's registry, over HTTP: every route, Confluent's error codes and content
type,
state replayed from the topic by a second registry (a restart). Runs in the default suite (a few seconds)."""

from __future__ import annotations

import json
from typing import Any

from harness.registryutil import RegistryThread, avro_record

V1 = avro_record("User", ("name", "string"))
V2 = avro_record("User", ("name", "string"), ("age", "int", 0))  # adds a field with a default
BAD = avro_record("User", ("name", "string"), ("email", "string"))  # adds one without: not BACKWARD


def test_register_read_and_ids(registry: RegistryThread) -> None:
    r = registry
    s = "users-value"
    st, types = r.call("GET", "/schemas/types")
    assert st == 200 and "AVRO" in types
    st, body = r.call("POST", f"/subjects/{s}/versions", {"schema": V1})
    assert st == 200 and isinstance(body["id"], int)
    id1 = body["id"]
    # the same schema again: the same id, no new version; whitespace and member order do not matter
    assert r.call("POST", f"/subjects/{s}/versions", {"schema": json.dumps(json.loads(V1), indent=2)}) == (
        200,
        {"id": id1},
    )
    assert r.call("GET", f"/subjects/{s}/versions") == (200, [1])
    st, body = r.call("POST", f"/subjects/{s}/versions", {"schema": V2})
    id2 = body["id"]
    assert st == 200 and id2 > id1
    assert r.call("GET", f"/subjects/{s}/versions") == (200, [1, 2])
    assert s in r.call("GET", "/subjects")[1]
    # the same schema under another subject: its id is global
    assert r.call("POST", "/subjects/other-value/versions", {"schema": V1}) == (200, {"id": id1})
    assert r.call("GET", f"/schemas/ids/{id1}/subjects") == (200, ["other-value", s])
    assert r.call("GET", f"/schemas/ids/{id1}/versions") == (
        200,
        [{"subject": "other-value", "version": 1}, {"subject": s, "version": 1}],
    )
    st, latest = r.call("GET", f"/subjects/{s}/versions/latest")
    assert st == 200 and latest == {"subject": s, "version": 2, "id": id2, "schema": V2}
    assert r.call("GET", f"/subjects/{s}/versions/-1")[1] == latest
    assert r.call("GET", f"/subjects/{s}/versions/1")[1]["id"] == id1
    assert r.call("GET", f"/subjects/{s}/versions/1/schema", raw=True) == (200, V1)
    assert r.call("GET", f"/schemas/ids/{id2}") == (200, {"schema": V2})
    assert r.call("GET", f"/schemas/ids/{id2}/schema", raw=True) == (200, V2)
    # lookup
    st, found = r.call("POST", f"/subjects/{s}", {"schema": V1})
    assert st == 200 and found == {"subject": s, "version": 1, "id": id1, "schema": V1}
    assert (
        r.call("POST", f"/subjects/{s}", {"schema": avro_record("Nope", ("x", "int"))})[1]["error_code"]
        == 40403
    )
    # GET /schemas: every version, filters
    # paging of list answers
    assert r.call("GET", f"/subjects/{s}/versions?offset=1&limit=1") == (200, [2])
    assert r.call("GET", f"/schemas/ids/{id1}/subjects?limit=1") == (200, ["other-value"])
    assert r.call("GET", "/schemas?subjectPrefix=users-&offset=1")[1][0]["version"] == 2
    st, all_ = r.call("GET", "/schemas?subjectPrefix=users-")
    assert st == 200 and [(x["subject"], x["version"]) for x in all_] == [(s, 1), (s, 2)]
    assert [x["version"] for x in r.call("GET", "/schemas?subjectPrefix=users-&latestOnly=true")[1]] == [2]


def test_errors(registry: RegistryThread) -> None:
    r = registry
    s = "errors-value"
    r.call("POST", f"/subjects/{s}/versions", {"schema": V1})

    def code(method: str, path: str, body: Any = None) -> tuple[int, int]:
        st, b = r.call(method, path, body)
        assert set(b) == {"error_code", "message"} and b["message"], b
        return st, b["error_code"]

    assert code("GET", "/subjects/nope/versions") == (404, 40401)
    assert code("GET", "/subjects/nope/versions/1") == (404, 40401)
    assert code("GET", f"/subjects/{s}/versions/9") == (404, 40402)
    assert code("GET", "/schemas/ids/987654") == (404, 40403)
    assert code("GET", f"/subjects/{s}/versions/0") == (422, 42202)
    assert code("GET", f"/subjects/{s}/versions/abc") == (422, 42202)
    assert code("POST", f"/subjects/{s}/versions", {"schema": "{not json"}) == (422, 42201)
    assert code("POST", f"/subjects/{s}/versions", {"schema": '{"type":"nosuchtype"}'}) == (422, 42201)
    assert code("POST", f"/subjects/{s}/versions", {"schema": V1, "schemaType": "XML"}) == (422, 42201)
    assert code("POST", f"/subjects/{s}/versions", {"nothing": 1}) == (422, 42201)
    # a default that does not match its type is refused (Avro spec: a default must match the schema)
    assert code("POST", f"/subjects/{s}/versions", {"schema": avro_record("D", ("a", "int", "x"))}) == (
        422,
        42201,
    )
    assert code("POST", f"/subjects/{s}/versions", {"schema": BAD}) == (409, 409)
    assert code("PUT", "/config", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert code("PUT", "/mode", {"mode": "WRITEONLY"}) == (422, 42204)
    assert code("GET", f"/config/{s}") == (404, 40408)
    assert code("GET", f"/mode/{s}") == (404, 40409)
    assert code("GET", "/no/such/route") == (404, 404)
    # Confluent's endpoints moldau does not serve (docs/schema-registry.md, API coverage): 404, not a crash
    unserved = (f"/subjects/{s}/metadata", "/schemas/guids/x", "/associations", "/exporters")
    for path in (*unserved, "/dek-registry/v1/keks", "/status/ready"):  # the last is Redpanda's
        assert code("GET", path) == (404, 404), path
    assert r.call("GET", "/") == (200, {})
    assert r.call("GET", "/contexts") == (200, ["."])
    assert code(
        "POST",
        f"/subjects/{s}/versions",
        {"schema": V2, "references": [{"name": "x", "subject": "missing", "version": 1}]},
    ) == (422, 42201)


def test_compatibility_and_config(registry: RegistryThread) -> None:
    r = registry
    s = "compat-value"
    r.call("POST", f"/subjects/{s}/versions", {"schema": V1})
    path = f"/compatibility/subjects/{s}/versions"
    assert r.call("POST", path + "/latest", {"schema": V2}) == (200, {"is_compatible": True})
    st, b = r.call("POST", path + "/latest?verbose=true", {"schema": BAD})
    assert st == 200 and b["is_compatible"] is False and "email" in b["messages"][0]
    assert r.call("POST", path, {"schema": BAD}) == (200, {"is_compatible": False})  # without a version
    assert r.call("POST", path + "/1", {"schema": V2}) == (200, {"is_compatible": True})
    assert r.call("POST", path + "/7", {"schema": V2})[1]["error_code"] == 40402
    assert r.call("POST", "/compatibility/subjects/fresh/versions/latest", {"schema": BAD}) == (
        200,
        {"is_compatible": True},
    )  # nothing to be incompatible with
    # per-subject config
    assert r.call("GET", f"/config/{s}?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert r.call("PUT", f"/config/{s}", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert r.call("GET", f"/config/{s}") == (200, {"compatibilityLevel": "NONE"})
    assert r.call("GET", "/config")[1]["compatibilityLevel"] == "BACKWARD"  # the global one is unchanged
    assert r.call("POST", f"/subjects/{s}/versions", {"schema": BAD})[0] == 200  # NONE: anything goes
    assert r.call("DELETE", f"/config/{s}") == (200, {"compatibilityLevel": "NONE"})
    assert r.call("GET", f"/config/{s}")[1]["error_code"] == 40408
    # other config fields are accepted and kept
    assert r.call("PUT", f"/config/{s}", {"compatibility": "FULL", "normalize": True})[0] == 200
    assert r.call("GET", f"/config/{s}")[1] == {"compatibilityLevel": "FULL", "normalize": True}


def test_deletes(registry: RegistryThread) -> None:
    r = registry
    s = "del-value"
    id1 = r.call("POST", f"/subjects/{s}/versions", {"schema": V1})[1]["id"]
    r.call("POST", f"/subjects/{s}/versions", {"schema": V2})
    # a version: soft, then permanent
    assert r.call("DELETE", f"/subjects/{s}/versions/2?permanent=true")[1]["error_code"] == 40407
    assert r.call("DELETE", f"/subjects/{s}/versions/2") == (200, 2)
    assert r.call("DELETE", f"/subjects/{s}/versions/2")[1]["error_code"] == 40406
    assert r.call("GET", f"/subjects/{s}/versions") == (200, [1])
    assert r.call("GET", f"/subjects/{s}/versions?deleted=true") == (200, [1, 2])
    assert r.call("GET", f"/subjects/{s}/versions/2")[1]["error_code"] == 40402
    assert r.call("GET", f"/subjects/{s}/versions/2?deleted=true")[1]["version"] == 2
    assert r.call("DELETE", f"/subjects/{s}/versions/2?permanent=true") == (200, 2)
    assert r.call("GET", f"/subjects/{s}/versions?deleted=true") == (200, [1])
    # the subject: soft, then permanent
    assert r.call("DELETE", f"/subjects/{s}?permanent=true")[1]["error_code"] == 40405
    assert r.call("DELETE", f"/subjects/{s}") == (200, [1])
    assert r.call("DELETE", f"/subjects/{s}")[1]["error_code"] == 40404
    assert s not in r.call("GET", "/subjects")[1]
    assert s in r.call("GET", "/subjects?deleted=true")[1]
    assert s in r.call("GET", "/subjects?deletedOnly=true")[1]
    assert s not in r.call("GET", "/subjects?deletedOnly=true&subjectPrefix=zzz")[1]
    assert r.call("GET", f"/subjects/{s}/versions")[1]["error_code"] == 40401
    assert r.call("POST", f"/subjects/{s}", {"schema": V1})[1]["error_code"] == 40401
    assert r.call("POST", f"/subjects/{s}?deleted=true", {"schema": V1})[1]["id"] == id1
    assert r.call("DELETE", f"/subjects/{s}?permanent=true") == (200, [1])
    assert s not in r.call("GET", "/subjects?deleted=true")[1]
    assert r.call("DELETE", f"/subjects/{s}")[1]["error_code"] == 40401
    # registering again after a permanent delete starts at version 1 with the same id as before
    assert r.call("POST", f"/subjects/{s}/versions", {"schema": V1}) == (200, {"id": id1})
    assert r.call("GET", f"/subjects/{s}/versions") == (200, [1])


def test_references_and_referencedby(registry: RegistryThread) -> None:
    r = registry
    addr = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "t.ref",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    aid = r.call("POST", "/subjects/address/versions", {"schema": addr})[1]["id"]
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "t.ref",
            "fields": [{"name": "home", "type": "t.ref.Address"}],
        }
    )
    refs = [{"name": "t.ref.Address", "subject": "address", "version": 1}]
    # without the reference the name is unknown
    assert r.call("POST", "/subjects/person/versions", {"schema": person})[1]["error_code"] == 42201
    st, b = r.call("POST", "/subjects/person/versions", {"schema": person, "references": refs})
    assert st == 200 and b["id"] != aid
    pid = b["id"]
    assert r.call("GET", "/subjects/address/versions/1/referencedby") == (200, [pid])
    assert r.call("GET", f"/schemas/ids/{pid}")[1] == {"references": refs, "schema": person}
    assert r.call("GET", "/subjects/person/versions/1")[1]["references"] == refs
    # a referenced schema cannot be deleted (42206)
    assert r.call("DELETE", "/subjects/address/versions/1")[1]["error_code"] == 42206
    assert r.call("DELETE", "/subjects/address")[1]["error_code"] == 42206


def test_modes(registry: RegistryThread) -> None:
    r = registry
    s = "mode-value"
    r.call("POST", f"/subjects/{s}/versions", {"schema": V1})
    assert r.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert r.call("PUT", f"/mode/{s}", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert r.call("GET", f"/mode/{s}") == (200, {"mode": "READONLY"})
    assert r.call("POST", f"/subjects/{s}/versions", {"schema": V2})[1]["error_code"] == 42205
    assert r.call("DELETE", f"/subjects/{s}")[1]["error_code"] == 42205
    assert r.call("GET", f"/subjects/{s}/versions") == (200, [1])  # reads still work
    assert r.call("DELETE", f"/mode/{s}") == (200, {"mode": "READONLY"})
    assert r.call("GET", f"/mode/{s}?defaultToGlobal=true") == (200, {"mode": "READWRITE"})
    # IMPORT: the subject must be new (or force=true); ids and versions come from the request
    assert r.call("PUT", f"/mode/{s}", {"mode": "IMPORT"})[1]["error_code"] == 42205
    imp = "imported-value"
    assert (
        r.call("POST", f"/subjects/{imp}/versions", {"schema": V2, "id": 5000, "version": 3})[1]["error_code"]
        == 42205
    )  # not in import mode
    assert r.call("PUT", f"/mode/{imp}", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert r.call("POST", f"/subjects/{imp}/versions", {"schema": V2, "id": 5000, "version": 3}) == (
        200,
        {"id": 5000},
    )
    assert r.call("GET", f"/subjects/{imp}/versions/3")[1]["id"] == 5000
    r.call("DELETE", f"/mode/{imp}")
    # the next id allocated after an import is above it
    assert (
        r.call(
            "POST", "/subjects/after-import/versions", {"schema": avro_record("AfterImport", ("x", "long"))}
        )[1]["id"]
        > 5000
    )


def test_metadata_and_ruleset_kept(registry: RegistryThread) -> None:
    r = registry
    meta = {"properties": {"owner": "team-a"}}
    rules = {
        "domainRules": [
            {"name": "r1", "kind": "CONDITION", "mode": "WRITE", "type": "CEL", "expr": "message.name != ''"}
        ]
    }
    sid = r.call(
        "POST",
        "/subjects/meta-value/versions",
        {"schema": V1, "metadata": meta, "ruleSet": rules, "schemaType": "AVRO"},
    )[1]["id"]
    got = r.call("GET", "/subjects/meta-value/versions/1")[1]
    assert got["metadata"] == meta and got["ruleSet"] == rules and got["id"] == sid
    # null metadata and ruleSet are accepted (Redpanda refuses them with 422)
    assert (
        r.call("POST", "/subjects/meta2-value/versions", {"schema": V1, "metadata": None, "ruleSet": None})[0]
        == 200
    )


def test_state_replayed_by_a_new_instance(registry: RegistryThread, broker: Any, schemas_topic: str) -> None:
    """A second registry on the same topic (a restart) rebuilds the same state from the records."""
    r = registry
    r.call("POST", "/subjects/replay-value/versions", {"schema": V1})
    r.call("PUT", "/config/replay-value", {"compatibility": "FORWARD"})
    expect = {
        p: r.call("GET", p)
        for p in ("/subjects", "/schemas", "/subjects?deleted=true", "/config/replay-value", "/mode")
    }
    other = RegistryThread(broker.bootstrap, topic=schemas_topic).start()
    try:
        for p, answer in expect.items():
            assert other.call("GET", p) == answer, p
        # and its next id follows the replayed ones
        top = max(x["id"] for x in expect["/schemas"][1])
        new = other.call(
            "POST", "/subjects/replay2-value/versions", {"schema": avro_record("Fresh", ("f", "double"))}
        )[1]["id"]
        assert new > top
    finally:
        other.stop()


def test_metrics(registry: RegistryThread) -> None:
    """GET /metrics in Prometheus' text format (parsed by the Prometheus client's parser)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    registry.call("GET", "/subjects/metrics-none/versions")  # a 404, counted
    # a write: answered once this instance leads (a rebalance may be under way after another test's instance)
    assert registry.call("POST", "/subjects/metrics-value/versions", {"schema": V1})[0] == 200
    with urllib.request.urlopen(registry.url + "/metrics", timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    gauges = {
        name: fams[f"moldau_registry_{name}"].samples[0].value
        for name in ("subjects", "versions", "schemas", "max_schema_id", "leader")
    }
    assert gauges["subjects"] == len(registry.call("GET", "/subjects")[1]) and gauges["leader"] == 1
    assert gauges["max_schema_id"] >= gauges["schemas"] > 0
    samples = fams["moldau_registry_requests"].samples
    assert any(
        s.labels == {"method": "GET", "route": "/subjects/{subject}/versions", "status": "404"}
        and s.value >= 1
        for s in samples
    )
