"""KIP-599's controller mutation quota as Kafka's Java Admin client meets it (CreateTopics v7: the strict
quota). The client sets ``controller_mutation_rate=10`` on its own client id, creates topics of 100, 50 and 1
partitions one request each without retrying quota violations, then one more with its default retries:
the first two pass (a burst of 110), the third is refused with ThrottlingQuotaExceededException carrying the
throttle time, the retried one succeeds once the throttle time has passed. Against the Apache Kafka broker
(the whole matrix, ``MOLDAU_JVM_FULL=1``) the same test is the control.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable


def test_java_admin_meets_the_controller_mutation_quota(jrun: Callable[..., list[dict[str, Any]]]) -> None:
    tag = uuid.uuid4().hex[:8]
    lines = jrun("MutationQuota", "--client-id", f"mutator-{tag}", "--prefix", f"mq-{tag}",
                 "--partitions", "100,50,1", "--quota", "10", timeout=240)
    creates = [e for e in lines if e.get("step") == "create"]
    assert [e["ok"] for e in creates] == [True, True, False], creates
    refused = creates[2]
    assert refused["error"].startswith("ThrottlingQuotaExceededException"), refused
    # the bucket went to at most -40 (4 s at 10/s); less by the refill while the creations were answered
    assert 0 < refused["throttle_time_ms"] <= 4000, refused
    retried = [e for e in lines if e.get("step") == "retried"]
    assert retried and retried[0]["ok"], retried
