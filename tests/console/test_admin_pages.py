"""Transactions and producers, ACLs and SCRAM users, the data-flow graph and the throughput plot, in the
browser against a real broker."""

from __future__ import annotations

import os
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from selenium.webdriver.common.by import By

from moldau.console import extra

from harness.consoleutil import ConsoleThread, submit, wait


def q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


@pytest.mark.moldau_only("tansu does not answer ListTransactions / DescribeProducers")
def test_transactions_page_shows_an_ongoing_transaction(
    browser: Any, console: Any, broker: Any, make_topic: Any, shot: Any
) -> None:
    name = make_topic(partitions=2)
    txn_id = f"console-txn-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(name, b"in a transaction", partition=1)
    assert p.flush(20) == 0
    try:
        browser.get(console.url + "/transactions?q=" + q(txn_id))
        row = browser.find_element(By.CSS_SELECTOR, f"#transactions tr[data-txn='{txn_id}']")
        assert row.find_element(By.CSS_SELECTOR, "td.state").text == "Ongoing"
        assert f"{name}-1" in row.text
        prod = [
            tr.text for tr in browser.find_elements(By.CSS_SELECTOR, "#producers tbody tr") if name in tr.text
        ]
        assert prod and prod[0].split()[-1] == "0", prod  # open transaction from offset 0
        assert browser.find_elements(By.ID, "no-hanging")  # an ongoing transaction is not a hanging one
        shot("transactions")
        # the flow graph: this transactional id writes the topic
        browser.get(console.url + "/flow")
        edges = {
            (e.get_attribute("data-from"), e.get_attribute("data-to"))
            for e in browser.find_elements(By.CSS_SELECTOR, "#flow path.edge")
        }
        assert (f"txn:{txn_id}", f"topic:{name}") in edges
    finally:
        p.commit_transaction(20)
    browser.get(console.url + "/transactions?q=" + q(txn_id))
    state = browser.find_element(By.CSS_SELECTOR, f"#transactions tr[data-txn='{txn_id}'] td.state").text
    assert state in ("CompleteCommit", "Empty", "PrepareCommit")


def test_hanging_transactions_are_found() -> None:
    """Kafka's definition: a partition's open transaction no coordinator reports there, or older than its
    timeout."""
    now = 1_000_000_000
    prods = [
        extra.ProducerState("t", 0, 7, 0, 3, now, 0, 10),  # ongoing, known: fine
        extra.ProducerState("t", 1, 8, 0, 3, now, 0, 20),  # no coordinator knows pid 8: hanging
        extra.ProducerState("t", 2, 9, 0, 3, now, 0, -1),  # no open transaction
        extra.ProducerState("u", 0, 7, 0, 3, now, 0, 5),  # pid 7's transaction does not name u-0
        extra.ProducerState("t", 3, 11, 0, 3, now, 0, 30),
    ]  # older than its timeout
    txns = [
        extra.Transaction("a", 7, "Ongoing", 1, 60_000, now - 1000, 0, [("t", 0)]),
        extra.Transaction("b", 11, "Ongoing", 1, 60_000, now - 120_000, 0, [("t", 3)]),
    ]
    got = {(p.topic, p.partition) for p in extra.hanging(prods, txns, now)}
    assert got == {("t", 1), ("u", 0), ("t", 3)}


def test_flow_shows_which_groups_read_which_topics(
    browser: Any, console: Any, broker: Any, make_topic: Any, group_id: str, shot: Any
) -> None:
    name = make_topic(partitions=1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group_id, "enable.auto.commit": False})
    try:
        c.commit(offsets=[CkTopicPartition(name, 0, 0)], asynchronous=False)
    finally:
        c.close()
    browser.get(console.url + "/flow")
    edges = {
        (e.get_attribute("data-from"), e.get_attribute("data-to"))
        for e in browser.find_elements(By.CSS_SELECTOR, "#flow path.edge")
    }
    assert (f"topic:{name}", f"group:{group_id}") in edges
    link = browser.find_element(By.CSS_SELECTOR, f"#flow a[data-node='group:{group_id}']")
    assert link.get_dom_attribute("href").endswith(f"/groups/{q(group_id)}")
    shot("flow")


def test_throughput_plot_shows_records_coming_in(
    browser: Any, console: Any, broker: Any, make_topic: Any, shot: Any
) -> None:
    name = make_topic(partitions=1)
    browser.get(console.url + f"/topics/{q(name)}")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})

    def rates() -> list[float]:
        data = browser.execute_script("var c = window.moldauCharts.throughput; return c ? c.data : null;")
        return [v for v in (data[1] if data else []) if v is not None]

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(r > 0 for r in rates()):
        for _ in range(50):
            p.produce(name, b"r" * 100, partition=0)
        p.flush(10)
        time.sleep(0.3)
    assert any(r > 0 for r in rates()), rates()
    assert browser.find_elements(By.CSS_SELECTOR, "#throughput canvas")
    if os.environ.get("MOLDAU_CONSOLE_SCREENSHOTS"):  # a few more points for the picture
        for step in range(8):
            for _ in range(50 * (1 + step % 3)):
                p.produce(name, b"r" * 100, partition=0)
            p.flush(10)
            time.sleep(0.4)
    shot("topic")


# ---------------------------------------------------------------------------------------------- security
@pytest.fixture(scope="module")
def acl_broker(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if kind != "moldau":
        pytest.skip("ACLs and SCRAM users need the moldau broker's authorizer")
    from harness.brokerproc import BrokerProcess

    b = BrokerProcess(
        "moldau",
        tmp_path_factory.mktemp("acl-broker") / "data",
        settings={
            "authorizer.class.name": "acl",
            "allow.everyone.if.no.acl.found": "true",
            "group.initial.rebalance.delay.ms": "0",
        },
        log_dir=tmp_path_factory.mktemp("acl-broker-log"),
    )
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.mark.moldau_only("ACLs and SCRAM users")
def test_acls_and_scram_users_from_ui(browser: Any, acl_broker: Any, shot: Any) -> None:
    from confluent_kafka.admin import AdminClient

    c = ConsoleThread(acl_broker.bootstrap).start()
    try:
        browser.get(c.url + "/security")
        form = browser.find_element(By.ID, "acl-create")
        form.find_element(By.NAME, "principal").send_keys("User:alice")
        form.find_element(By.NAME, "resource_name").send_keys("orders")
        submit(browser, "acl-create")
        assert "created ACL" in browser.find_element(By.ID, "flash").text
        admin = AdminClient({"bootstrap.servers": acl_broker.bootstrap})
        flt = AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        acls = admin.describe_acls(flt).result(20)
        assert [(a.name, a.principal, a.operation, a.permission_type) for a in acls] == [
            ("orders", "User:alice", AclOperation.READ, AclPermissionType.ALLOW)
        ]
        rows = browser.find_elements(By.CSS_SELECTOR, "#acls tr.acl")
        assert len(rows) == 1 and "User:alice" in rows[0].text
        # a SCRAM user
        form = browser.find_element(By.ID, "user-upsert")
        form.find_element(By.NAME, "name").send_keys("bob")
        form.find_element(By.NAME, "password").send_keys("bob-secret")
        submit(browser, "user-upsert")
        users = browser.find_elements(By.CSS_SELECTOR, "#users tr.user")
        assert len(users) == 1 and "bob" in users[0].text and "SCRAM-SHA-256 (8192)" in users[0].text
        described = admin.describe_user_scram_credentials(["bob"])["bob"].result(20)
        assert [(i.mechanism.name, i.iterations) for i in described.scram_credential_infos] == [
            ("SCRAM_SHA_256", 8192)
        ]
        shot("security")
        # delete both
        old = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.CSS_SELECTOR, "form.acl-delete button").click()
        wait(browser, 5).until(lambda b: _accept(b))
        wait(browser).until(lambda b: _stale(old))
        assert admin.describe_acls(flt).result(20) == []
        old = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.CSS_SELECTOR, "form.user-delete button").click()
        wait(browser, 5).until(lambda b: _accept(b))
        wait(browser).until(lambda b: _stale(old))
        assert not browser.find_elements(By.CSS_SELECTOR, "#users tr.user")
    finally:
        c.stop()


def _accept(browser: Any) -> bool:
    try:
        browser.switch_to.alert.accept()
        return True
    except Exception:  # noqa: BLE001 - not open yet
        return False


def _stale(el: Any) -> bool:
    try:
        _ = el.tag_name
        return False
    except Exception:  # noqa: BLE001 - the page was replaced
        return True


def test_security_page_without_an_authorizer_says_so(browser: Any, console: Any, kind: str) -> None:
    browser.get(console.url + "/security")
    assert "Error" not in browser.title
    if kind == "moldau":  # no authorizer: DescribeAcls answers SECURITY_DISABLED, shown as such
        assert "SECURITY_DISABLED" in browser.find_element(By.ID, "acls-error").text.upper().replace(" ", "_")
