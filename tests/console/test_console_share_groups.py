"""Share groups (KIP-932) in the console: two real moldau ShareConsumers hold a group on a real broker; the
groups list shows it (type, state, members) and its page shows members, assignments, SPSO, end and lag, over
HTTP and in Chromium."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

import moldau

from harness.consoleutil import Http, q, wait

pytestmark = pytest.mark.single_broker("share groups are served by one broker so far")

CONSUMED, PENDING = 10, 5


@pytest.fixture(scope="module")
def share_group(broker: Any) -> Iterator[tuple[str, str]]:
    """A share group with two members on a one-partition topic: the first 10 records accepted, 5 more
    produced after that and not yet fetched (SPSO 10, end 15, lag 5)."""
    topic, gid = f"share-{uuid.uuid4().hex[:8]}", f"console-share-{uuid.uuid4().hex[:8]}"
    res = moldau.ConfigResource(moldau.ConfigResource.GROUP, gid)
    with moldau.Admin(bootstrap_servers=broker.bootstrap) as a:
        a.create_topics([moldau.NewTopic(topic, 1, 1)])
        a.incremental_alter_configs({res: [moldau.AlterConfigOp("share.auto.offset.reset", "earliest")]})
    with moldau.Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(CONSUMED):
            p.send(topic, str(i).encode())
        p.flush()
    members = []
    for i in range(2):
        c = moldau.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": gid,
                                  "client.id": f"worker-{i}"})
        c.subscribe([topic])
        members.append(c)
    try:
        got: set[int] = set()
        end = time.time() + 20
        while len(got) < CONSUMED and time.time() < end:
            for c in members:
                got.update(r.offset for r in c.poll(0.2))
        assert len(got) == CONSUMED
        for c in members:
            c.commit_sync()  # the implicit acceptances of the last poll
        with moldau.Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            for i in range(PENDING):
                p.send(topic, b"later")
            p.flush()
        with moldau.Admin(bootstrap_servers=broker.bootstrap) as a:  # both members assigned, SPSO moved
            end = time.time() + 15
            while time.time() < end:
                d = a.describe_share_groups([gid])[gid]
                off = a.list_share_group_offsets(gid).get(moldau.TopicPartition(topic, 0))
                if (len(d.members) == 2 and all(m.assignment for m in d.members) and off is not None
                        and off.start_offset == CONSUMED):
                    break
                time.sleep(0.2)
        yield gid, topic
    finally:
        for c in members:
            c.close()


def _cells(body: str, row: str) -> list[str]:
    m = re.search(rf'<tr data-tp="{re.escape(row)}">(.*?)</tr>', body, re.S)
    assert m, body
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", m.group(1), re.S)]


def test_share_group_over_http(console: Any, share_group: tuple[str, str]) -> None:
    gid, topic = share_group
    http = Http(console.url)
    status, _h, body = http.request("GET", "/groups?q=" + q(gid))
    assert status == 200
    row = re.search(rf'<tr data-group="{re.escape(gid)}">(.*?)</tr>', body, re.S)
    assert row, body
    assert '<td class="type">share</td>' in row.group(1)
    assert '<td class="n members">2</td>' in row.group(1)
    assert re.search(r"<td>Stable</td>", row.group(1)), row.group(1)

    status, _h, body = http.request("GET", f"/groups/{q(gid)}")
    assert status == 200 and "Share group" in body and 'id="share-offsets"' in body
    assert '<span id="member-count">2</span>' in body
    assert body.count('class="assignment">' + f"{topic}-0<") == 2  # one partition, both members
    tp, start, end, done, lag, holders = _cells(body, f"{topic}-0")
    assert (start, end, done, lag) == (str(CONSUMED), str(CONSUMED + PENDING), "0", str(PENDING))
    assert holders == "worker-0, worker-1"
    assert re.search(r'id="total-lag">5<', body)
    # offsets of a share group are not reset through the consumer-group form
    status, _h, body = http.request("GET", f"/groups/{q(gid)}/reset?strategy=earliest&topic={q(topic)}")
    assert status == 400 and "is a share group" in body


def test_share_group_in_browser(browser: Any, console: Any, share_group: tuple[str, str], shot: Any) -> None:
    gid, topic = share_group
    browser.get(console.url + "/groups?q=" + q(gid))
    row = browser.find_element(By.CSS_SELECTOR, f"#groups tr[data-group='{gid}']")
    assert row.find_element(By.CSS_SELECTOR, "td.type").text == "share"
    assert row.find_element(By.CSS_SELECTOR, "td.members").text == "2"
    row.find_element(By.CSS_SELECTOR, "a").click()
    wait(browser).until(lambda b: b.find_elements(By.ID, "share-offsets"))
    shot("share-group")
    assert browser.find_element(By.ID, "group-state").text == "Stable"
    clients = sorted(e.text for e in browser.find_elements(By.CSS_SELECTOR, "#members td.client"))
    assert clients == ["worker-0", "worker-1"]
    tr = browser.find_element(By.CSS_SELECTOR, f"#share-offsets tr[data-tp='{topic}-0']")
    assert tr.find_element(By.CSS_SELECTOR, "td.start").text == str(CONSUMED)
    assert tr.find_element(By.CSS_SELECTOR, "td.end").text == str(CONSUMED + PENDING)
    assert tr.find_element(By.CSS_SELECTOR, "td.lag").text == str(PENDING)

