"""The console's Schemas pages in headless Chromium, against moldau's schema registry: subjects with their
versions and compatibility levels, a diff between two versions, and messages of a registered topic decoded
from Confluent's framing (records written by confluent-kafka's AvroSerializer)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from harness.consoleutil import ConsoleThread, q, wait
from harness.registryutil import RegistryThread

V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"},
    {"name": "qty", "type": "int", "default": 1}]})


@pytest.fixture(scope="module")
def registry(broker: Any) -> Iterator[RegistryThread]:
    r = RegistryThread(broker.bootstrap, topic=f"_schemas-console-{uuid.uuid4().hex[:8]}").start()
    try:
        yield r
    finally:
        r.stop()


@pytest.fixture(scope="module")
def sr_console(broker: Any, registry: RegistryThread) -> Iterator[ConsoleThread]:
    c = ConsoleThread(broker.bootstrap, schema_registry=registry.url).start()
    try:
        yield c
    finally:
        c.stop()


def test_subjects_versions_diff_and_decoded_messages(browser, sr_console, registry, broker, make_topic, shot):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = make_topic()
    subject = f"{topic}-value"
    ck = SchemaRegistryClient({"url": registry.url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, value=AvroSerializer(ck, V1)({"id": 1, "item": "<b>tea</b>"}, ctx))
    p.produce(topic, value=AvroSerializer(ck, V2)({"id": 2, "item": "cup", "qty": 3}, ctx))
    p.produce(topic, value=b"plain bytes")
    assert p.flush(20) == 0
    from harness.registryutil import call

    assert call(registry.url, "PUT", f"/config/{q(subject)}", {"compatibility": "FULL"})[0] == 200
    id2 = ck.get_version(subject, 2).schema_id

    browser.get(sr_console.url + "/schemas")
    row = browser.find_element(By.CSS_SELECTOR, f"#subjects tr[data-subject='{subject}']")
    assert row.find_element(By.CSS_SELECTOR, ".versions").text == "2"
    assert row.find_element(By.CSS_SELECTOR, ".compat").text == "FULL"
    shot("schemas")
    row.find_element(By.TAG_NAME, "a").click()
    wait(browser).until(lambda b: b.find_elements(By.ID, "versions"))
    assert browser.find_element(By.ID, "compat").text == "FULL"
    compat = [tr.find_element(By.CSS_SELECTOR, ".compatible").text
              for tr in browser.find_elements(By.CSS_SELECTOR, "#versions tbody tr")]
    assert compat == ["-", "yes"]  # v2 adds a field with a default: FULL-compatible with v1
    added = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#diff ins")]
    assert any('"qty"' in line for line in added), added
    assert not browser.find_elements(By.CSS_SELECTOR, "#diff del")
    shot("schema-diff")
    # the same version on both sides: no diff
    Select(browser.find_element(By.ID, "diff-a")).select_by_visible_text("2")
    browser.find_element(By.ID, "diff-go").click()
    wait(browser).until(lambda b: b.find_elements(By.ID, "no-diff"))
    assert '"qty"' in browser.find_element(By.ID, "schema").text

    browser.get(sr_console.url + f"/topics/{q(topic)}/messages?mode=earliest&decode=registry")
    values = [tr.find_elements(By.TAG_NAME, "td")[4].text
              for tr in browser.find_elements(By.CSS_SELECTOR, "#records tr.record")]
    assert len(values) == 3, values
    assert '"item": "<b>tea</b>"' in values[0] and "AVRO" in values[0]
    assert values[1].startswith(f"[schema id {id2}, AVRO]") and '"qty": 3' in values[1]
    assert "not in Confluent's framing" in values[2]
    assert not browser.find_elements(By.CSS_SELECTOR, "#records b")  # record contents stay text
    shot("messages-registry")


def test_without_a_registry_no_schemas_pages(console: Any, make_topic: Any) -> None:
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(console.url + "/schemas", timeout=10)
    assert e.value.code == 404
    topic = make_topic()
    with pytest.raises(urllib.error.HTTPError) as e:  # 'registry' is not a decoding there
        urllib.request.urlopen(console.url + f"/topics/{q(topic)}/messages?decode=registry", timeout=10)
    assert e.value.code == 400
    with urllib.request.urlopen(console.url + "/topics", timeout=10) as resp:
        assert 'href="/schemas"' not in resp.read().decode()
