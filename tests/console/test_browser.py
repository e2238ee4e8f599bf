"""The console in a real headless Chromium against a real broker: create a topic, produce and see it,
seek by offset and by timestamp, live tail of a confluent-kafka record, a lag plot that falls as a consumer
catches up, reset offsets (checked with the admin API), read-only mode, and attacker-controlled record
contents shown as text."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

import moldau

from harness.consoleutil import assert_no_alert, every_post_route, q, submit, wait

XSS = "<script>alert(1)</script>"


def produce_ck(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes | None, int | None]],
    headers: list[tuple[str, bytes]] | None = None,
    partition: int = 0,
    one_batch_each: bool = False,
) -> None:
    """Produce with confluent-kafka; ``one_batch_each`` waits for each record before the next (a batch per
    record: tansu's ListOffsets counts batches, not records)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for key, value, ts in records:
        kw: dict[str, Any] = {"partition": partition}
        if ts is not None:
            kw["timestamp"] = ts
        if headers:
            kw["headers"] = headers
        p.produce(topic, value=value, key=key, **kw)
        if one_batch_each:
            assert p.flush(20) == 0
    assert p.flush(20) == 0


def rows(browser: Any) -> list[dict[str, str]]:
    out = []
    for tr in browser.find_elements(By.CSS_SELECTOR, "#records tr.record"):
        tds = tr.find_elements(By.TAG_NAME, "td")
        out.append(
            {
                "partition": tds[0].text,
                "offset": tds[1].text,
                "key": tds[3].text,
                "value": tds[4].text,
                "headers": tds[5].text,
            }
        )
    return out


# ---------------------------------------------------------------------------------------------- pages
def test_overview_and_topic_list(browser: Any, console: Any, broker: Any, make_topic: Any, shot: Any) -> None:
    name = make_topic(partitions=3)
    browser.get(console.url + "/")
    assert browser.find_element(By.ID, "stat-brokers").text == "1"
    assert int(browser.find_element(By.ID, "stat-partitions").text.replace(",", "")) >= 3
    assert browser.find_elements(By.CSS_SELECTOR, "#brokers tbody tr")
    shot("overview")
    browser.get(console.url + "/topics?q=" + q(name))
    row = browser.find_element(By.CSS_SELECTOR, f"#topics tr[data-topic='{name}']")
    assert row.find_elements(By.TAG_NAME, "td")[1].text == "3"
    shot("topics")
    # the filter box narrows the list in place (htmx) and keeps the state in the URL
    browser.get(console.url + "/topics")
    box = browser.find_element(By.ID, "filter-q")
    box.send_keys(name)
    wait(browser).until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#topics tbody tr")) == 1)
    wait(browser).until(lambda b: "q=" in b.current_url)


def test_create_topic_from_ui(browser: Any, console: Any, broker: Any, topic: str, shot: Any) -> None:
    browser.get(console.url + "/topics")
    browser.find_element(By.ID, "new-topic-name").send_keys(topic)
    part = browser.find_element(By.ID, "new-topic-partitions")
    part.clear()
    part.send_keys("3")
    submit(browser, "create-topic")
    assert browser.find_element(By.ID, "topic-name").text == topic
    assert "created topic" in browser.find_element(By.ID, "flash").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 3
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        desc = admin.describe_topics([topic])[topic]
    assert len(desc.partitions) == 3


def test_produce_from_ui_and_see_it(
    browser: Any, console: Any, broker: Any, make_topic: Any, shot: Any
) -> None:
    name = make_topic(partitions=2)
    browser.get(console.url + f"/topics/{q(name)}/messages")
    Select(browser.find_element(By.ID, "p-partition")).select_by_value("1")
    browser.find_element(By.ID, "p-key").send_keys("user-7")
    browser.find_element(By.ID, "p-value").send_keys('{"amount": 42}')
    browser.find_element(By.ID, "p-headers").send_keys("trace=abc")
    submit(browser, "produce-form")
    assert "produced to partition 1 at offset 0" in browser.find_element(By.ID, "flash").text
    got = rows(browser)
    assert got == [
        {"partition": "1", "offset": "0", "key": "user-7", "value": '{"amount": 42}', "headers": "trace=abc"}
    ]
    shot("messages")
    # a real client reads what the console produced
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "console-check", "enable.auto.commit": False}
    )
    try:
        c.assign([CkTopicPartition(name, 1, 0)])
        msg = None
        deadline = time.monotonic() + 20
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(1.0)
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value(), msg.headers()) == (b"user-7", b'{"amount": 42}', [("trace", b"abc")])
    finally:
        c.close()
    # the value decoded as pretty JSON and as hex, and the expression filter
    browser.get(console.url + f"/topics/{q(name)}/messages?decode=json&expr=" + q("value.amount > 40"))
    assert rows(browser)[0]["value"] == '{\n  "amount": 42\n}'
    browser.get(console.url + f"/topics/{q(name)}/messages?decode=hex&expr=" + q("value.amount > 50"))
    assert rows(browser) == []
    browser.get(console.url + f"/topics/{q(name)}/messages?decode=hex")
    assert rows(browser)[0]["value"] == b'{"amount": 42}'.hex(" ")


def test_seek_by_offset(browser: Any, console: Any, broker: Any, make_topic: Any) -> None:
    name = make_topic(partitions=1)
    base = int(time.time() * 1000) - 60_000
    produce_ck(
        broker.bootstrap,
        name,
        [(f"k{i}".encode(), f"v{i}".encode(), base + i * 1000) for i in range(10)],
        one_batch_each=True,
    )
    browser.get(console.url + f"/topics/{q(name)}/messages")
    Select(browser.find_element(By.ID, "f-mode")).select_by_value("offset")
    off = browser.find_element(By.ID, "f-offset")
    off.clear()
    off.send_keys("6")
    browser.find_element(By.ID, "browse-submit").click()
    wait(browser).until(lambda b: "mode=offset" in b.current_url)
    assert [r["offset"] for r in rows(browser)] == ["6", "7", "8", "9"]
    assert [r["value"] for r in rows(browser)] == ["v6", "v7", "v8", "v9"]
    # newest first
    browser.get(console.url + f"/topics/{q(name)}/messages?mode=newest&limit=2")
    assert [r["offset"] for r in rows(browser)] == ["9", "8"]


@pytest.mark.tansu_gap("ListOffsets by timestamp")
def test_seek_by_timestamp(browser: Any, console: Any, broker: Any, make_topic: Any) -> None:
    name = make_topic(partitions=1)
    base = int(time.time() * 1000) - 60_000
    produce_ck(
        broker.bootstrap, name, [(f"k{i}".encode(), f"v{i}".encode(), base + i * 1000) for i in range(10)]
    )
    # the first record at or after the time of record 3: the first record at or after the time of record 3
    iso = (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 3000) / 1000))
        + f".{(base + 3000) % 1000:03d}Z"
    )
    browser.get(console.url + f"/topics/{q(name)}/messages?mode=timestamp&ts={q(iso)}&limit=3")
    assert [r["offset"] for r in rows(browser)] == ["3", "4", "5"]


def test_live_tail_shows_a_confluent_record_within_2s(
    browser: Any, console: Any, broker: Any, make_topic: Any, shot: Any
) -> None:
    name = make_topic(partitions=2)
    browser.get(console.url + f"/topics/{q(name)}/messages")
    browser.find_element(By.ID, "tail-toggle").click()
    wait(browser).until(lambda b: b.find_element(By.ID, "tail-status").text == "live")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    t0 = time.monotonic()
    p.produce(name, value=b"tailed " + XSS.encode(), key=b"live-key", partition=1)
    assert p.flush(10) == 0
    wait(browser, 10).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#tail-body tr.tail-record"))
    elapsed = time.monotonic() - t0
    tds = browser.find_element(By.CSS_SELECTOR, "#tail-body tr.tail-record").find_elements(By.TAG_NAME, "td")
    assert tds[0].text == "1" and tds[3].text == "live-key" and tds[4].text == "tailed " + XSS
    assert_no_alert(browser)
    shot("live-tail")
    assert elapsed <= 2.0, f"the record showed after {elapsed:.2f} s"
    browser.find_element(By.ID, "tail-toggle").click()


def test_record_contents_are_shown_as_text(browser: Any, console: Any, broker: Any, make_topic: Any) -> None:
    name = make_topic(partitions=1)
    produce_ck(
        broker.bootstrap,
        name,
        [
            (XSS.encode(), XSS.encode(), None),
            (b'"><img src=x onerror=alert(2)>', b"</pre></td><b>bold</b>", None),
        ],
        headers=[(XSS, XSS.encode())],
        one_batch_each=True,
    )
    browser.get(console.url + f"/topics/{q(name)}/messages?mode=earliest")
    assert_no_alert(browser)
    got = rows(browser)
    assert got[0]["key"] == XSS and got[0]["value"] == XSS and got[0]["headers"] == f"{XSS}={XSS}"
    assert got[1]["key"] == '"><img src=x onerror=alert(2)>' and got[1]["value"] == "</pre></td><b>bold</b>"
    assert not browser.find_elements(By.CSS_SELECTOR, "#records img, #records b:not(.header b) script")
    assert not browser.find_elements(By.CSS_SELECTOR, "#records td > b")
    # the same value as pretty JSON, in a filter box echoed back, and in a topic page of a group
    browser.get(console.url + f"/topics/{q(name)}/messages?decode=json&value=" + q(XSS))
    assert_no_alert(browser)
    assert browser.find_element(By.ID, "f-value").get_attribute("value") == XSS
    assert rows(browser)[0]["value"] == XSS


def _lag_points(browser: Any) -> list[float]:
    data = browser.execute_script("var c = window.moldauCharts.lag; return c ? c.data : null;")
    return [v for v in data[1] if v is not None] if data else []


@pytest.mark.tansu_gap("ListOffsets latest counts batches, not records")
def test_lag_plot_falls_as_the_consumer_catches_up(
    browser: Any, console: Any, broker: Any, make_topic: Any, group_id: str, shot: Any
) -> None:
    name = make_topic(partitions=1)
    produce_ck(broker.bootstrap, name, [(None, b"x" * 10, None)] * 300)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.commit(offsets=[CkTopicPartition(name, 0, 0)], asynchronous=False)
        browser.get(console.url + f"/groups/{q(group_id)}")
        assert browser.find_element(By.ID, "total-lag").text == "300"
        wait(browser, 20).until(lambda b: 300 in _lag_points(b))
        c.assign([CkTopicPartition(name, 0, 0)])
        consumed = 0
        for target in (100, 200, 300):
            while consumed < target:
                msg = c.poll(1.0)
                if msg is not None and msg.error() is None:
                    consumed += 1
            c.commit(offsets=[CkTopicPartition(name, 0, consumed)], asynchronous=False)
            want = 300 - target
            wait(browser, 20).until(lambda b, want=want: _lag_points(b) and _lag_points(b)[-1] == want)
        points = _lag_points(browser)
        first = points.index(300)
        tail = points[first:]
        assert tail[-1] == 0 and 200 in tail and 100 in tail
        assert all(a >= b for a, b in itertools.pairwise(tail)), f"lag went up while only consuming: {tail}"
        # the plot is drawn (uPlot canvas) and the table shows the lag now
        assert browser.find_elements(By.CSS_SELECTOR, "#lag canvas")
        browser.get(console.url + f"/groups/{q(group_id)}")
        assert browser.find_element(By.ID, "total-lag").text == "0"
        wait(browser, 10).until(lambda b: len(_lag_points(b)) >= 4)
        shot("group")
    finally:
        c.close()


@pytest.mark.tansu_gap("ListOffsets latest counts batches, not records")
def test_reset_offsets_from_ui(
    browser: Any, console: Any, broker: Any, make_topic: Any, group_id: str, shot: Any
) -> None:
    name = make_topic(partitions=2)
    produce_ck(broker.bootstrap, name, [(None, b"a", None)] * 5, partition=0)
    produce_ck(broker.bootstrap, name, [(None, b"b", None)] * 7, partition=1)
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_consumer_group_offsets(
            group_id, {moldau.TopicPartition(name, 0): 5, moldau.TopicPartition(name, 1): 7}
        )
    browser.get(console.url + f"/groups/{q(group_id)}")
    Select(browser.find_element(By.ID, "r-topic")).select_by_visible_text(name)
    Select(browser.find_element(By.ID, "r-strategy")).select_by_visible_text("shift")
    browser.find_element(By.ID, "r-value").send_keys("-3")
    browser.find_element(By.ID, "reset-preview").click()
    wait(browser).until(lambda b: b.find_elements(By.ID, "reset-plan"))
    plan = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in browser.find_elements(By.CSS_SELECTOR, "#reset-plan tbody tr")
    ]
    assert plan == [[f"{name}-0", "5", "2"], [f"{name}-1", "7", "4"]]
    shot("reset-preview")
    # the preview changed nothing
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        before = admin.list_consumer_group_offsets(group_id)
    assert {tp.partition: om.offset for tp, om in before.items()} == {0: 5, 1: 7}
    submit(browser, "reset-apply")
    assert "reset 2 offsets" in browser.find_element(By.ID, "flash").text
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        after = admin.list_consumer_group_offsets(group_id)
    assert {tp.partition: om.offset for tp, om in after.items()} == {0: 2, 1: 4}
    # to earliest through the same form
    browser.get(console.url + f"/groups/{q(group_id)}/reset?strategy=earliest&topic={q(name)}")
    submit(browser, "reset-apply")
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        after = admin.list_consumer_group_offsets(group_id)
    assert {tp.partition: om.offset for tp, om in after.items()} == {0: 0, 1: 0}


def test_read_only_console_refuses_every_change(
    browser: Any, ro_console: Any, broker: Any, make_topic: Any, group_id: str, shot: Any
) -> None:
    name = make_topic(partitions=1)
    produce_ck(broker.bootstrap, name, [(b"k", b"v", None)])
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_consumer_group_offsets(group_id, {moldau.TopicPartition(name, 0): 1})
    pages = [
        "/",
        "/topics",
        f"/topics/{q(name)}",
        f"/topics/{q(name)}/messages",
        "/groups",
        f"/groups/{q(group_id)}",
        f"/groups/{q(group_id)}/reset?strategy=earliest",
    ]
    for path in pages:
        browser.get(ro_console.url + path)
        assert browser.find_element(By.ID, "read-only-badge").text == "read-only"
        assert not browser.find_elements(By.CSS_SELECTOR, "form[method=post]"), path
        assert "Error" not in browser.title, path
    shot("read-only")
    # every change the console has, posted directly with a valid CSRF token, is refused
    refused = every_post_route(ro_console, name, group_id)
    assert refused and all(status == 403 for _path, status in refused), refused
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert name in admin.list_topics()
        tp = moldau.TopicPartition(name, 0)
        assert admin.list_consumer_group_offsets(group_id, [tp])[tp].offset == 1
        assert (
            admin.list_offsets({moldau.TopicPartition(name, 0): "latest"})[
                moldau.TopicPartition(name, 0)
            ].offset
            == 1
        )


@pytest.mark.parametrize("page", ["transactions", "security", "flow"])
def test_other_pages_render(browser: Any, console: Any, page: str, shot: Any) -> None:
    browser.get(console.url + f"/{page}")
    assert "Error" not in browser.title
    assert browser.find_element(By.TAG_NAME, "h1").text
    shot(page)


@pytest.mark.tansu_gap("DescribeConfigs reports a topic's own setting as a Kafka default; CreatePartitions")
def test_topic_changes_from_ui(browser: Any, console: Any, broker: Any, make_topic: Any) -> None:
    name = make_topic(partitions=1)
    tp_res = moldau.ConfigResource.topic(name)
    browser.get(console.url + f"/topics/{q(name)}")
    form = browser.find_element(By.ID, "config-form")
    form.find_element(By.NAME, "key").send_keys("retention.ms")
    form.find_element(By.NAME, "value").send_keys("3600000")
    submit(browser, "config-form")
    assert "retention.ms set to 3600000" in browser.find_element(By.ID, "flash").text
    row = browser.find_element(By.CSS_SELECTOR, "#config-table tr[data-config='retention.ms']")
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[1] == "3600000" and cells[2] == "topic", cells
    assert cells[3] == "168 (Kafka default: log.retention.hours)", cells
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.describe_configs([tp_res])[tp_res]["retention.ms"].value == "3600000"
    # back to the default
    form = browser.find_element(By.ID, "config-form")
    form.find_element(By.NAME, "key").send_keys("retention.ms")
    form.find_element(By.CSS_SELECTOR, "input[value=delete]").click()
    submit(browser, "config-form")
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.describe_configs([tp_res])[tp_res]["retention.ms"].value == "604800000"
    # more partitions
    total = browser.find_element(By.CSS_SELECTOR, "#partitions-form input[name=total]")
    total.clear()
    total.send_keys("4")
    submit(browser, "partitions-form")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")) == 4
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert len(admin.describe_topics([name])[name].partitions) == 4
    # a refused change shows the broker's error, escaped, and changes nothing
    total = browser.find_element(By.CSS_SELECTOR, "#partitions-form input[name=total]")
    browser.execute_script("arguments[0].removeAttribute('min')", total)
    total.clear()
    total.send_keys("2")
    submit(browser, "partitions-form")
    assert "INVALID_PARTITIONS" in browser.find_element(By.ID, "error-message").text.upper().replace(" ", "_")
    # delete
    browser.get(console.url + f"/topics/{q(name)}")
    submit(browser, "delete-topic")
    assert f"deleted topic {name}" in browser.find_element(By.ID, "flash").text
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert name not in admin.list_topics()


def test_delete_group_from_ui(
    browser: Any, console: Any, broker: Any, make_topic: Any, group_id: str
) -> None:
    name = make_topic(partitions=1)
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.alter_consumer_group_offsets(group_id, {moldau.TopicPartition(name, 0): 0})
    browser.get(console.url + "/groups?q=" + q(group_id))
    browser.find_element(By.CSS_SELECTOR, f"#groups tr[data-group='{group_id}'] a").click()
    wait(browser).until(lambda b: b.find_elements(By.ID, "group-id"))
    submit(browser, "delete-group")
    assert f"deleted group {group_id}" in browser.find_element(By.ID, "flash").text
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as admin:
        assert group_id not in {g.group_id for g in admin.list_consumer_groups()}


def test_download_json_lines(console: Any, broker: Any, make_topic: Any) -> None:
    import json

    from harness.consoleutil import Http

    name = make_topic(partitions=1)
    produce_ck(
        broker.bootstrap,
        name,
        [(b"k\xff", XSS.encode(), None), (None, b'{"a": 1}', None)],
        headers=[("h", b"v")],
        one_batch_each=True,
    )
    status, headers, body = Http(console.url).request(
        "GET", f"/topics/{q(name)}/messages.jsonl?mode=earliest"
    )
    assert status == 200 and headers["Content-Type"].startswith("application/x-ndjson")
    assert f'filename="{name}.jsonl"' in headers["Content-Disposition"]
    lines = [json.loads(line) for line in body.splitlines()]
    assert [(r["offset"], r["key"], r.get("key_encoding"), r["value"]) for r in lines] == [
        (0, "a/8=", "base64", XSS),
        (1, None, None, '{"a": 1}'),
    ]
    assert lines[0]["headers"] == [{"key": "h", "value": "v"}]
