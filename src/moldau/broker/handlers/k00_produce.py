"""Produce (key 0), v0-13.

* acks 0: everything is appended, no response at all (the router sends nothing). As in Kafka, if any
  partition failed the connection is closed so the client notices and refreshes its metadata.
* acks 1 / -1 (-1 = all: on one node the ISR is this node, so the local append is enough); other values:
  INVALID_REQUIRED_ACKS on every partition. When the partition's flush policy asks for an fsync per message
  (``flush.messages`` / ``log.flush.interval.messages`` = 1) the answer waits for a group-committed fsync;
  for acks=-1 that wait is bounded by timeout_ms (REQUEST_TIMED_OUT after it; the data stays written).
* Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION (unknown topic or partition; Produce never auto-creates,
  clients create through Metadata), UNKNOWN_TOPIC_ID (v13, topics named by id), INVALID_TOPIC_EXCEPTION
  (internal topics), CORRUPT_MESSAGE (bad CRC / framing), INVALID_RECORD (bad batch, keyless record on a
  compacted topic with record_errors, v8+), MESSAGE_TOO_LARGE (batch above max.message.bytes),
  INVALID_TIMESTAMP, NOT_ENOUGH_REPLICAS (min.insync.replicas above 1), and the log's producer-state errors
  (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, ...). A failed partition writes nothing.
* Legacy payloads (magic 0/1, Produce v0-2 clients) are converted to v2 batches before the append.
* log_append_time_ms (v2+) is the broker time for LogAppendTime topics, else -1; log_start_offset (v5+).
* Transactional batches (v3+) are checked by the transaction coordinator before the append
  (``transaction.partition.verification.enable``, KIP-890 part 1): the partition must be in the producer's
  ongoing transaction (INVALID_TXN_STATE), with the current producer id (INVALID_PRODUCER_ID_MAPPING) and
  epoch (INVALID_PRODUCER_EPOCH); while the transaction completes, NOT_ENOUGH_REPLICAS (retriable), as Kafka
  maps CONCURRENT_TRANSACTIONS for produce.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode, KafkaError, error_code_of

from ..context import RequestContext
from ..registry import handler
from ..replica_manager import AppendResult
from ..security.authorizer import TOPIC, TRANSACTIONAL_ID, WRITE, allowed

log = logging.getLogger(__name__)



@handler(api_key=0, min_version=0, max_version=13)
async def produce(ctx: RequestContext, req: m.ProduceRequest) -> m.ProduceResponse | None:
    svc = ctx.services
    rm = svc.replica_manager
    store = svc.metadata
    version = ctx.version
    acks = req.acks
    msg = m.ProduceResponse
    PartResp = msg.PartitionProduceResponse
    now = svc.clock.time_ms()
    by_id = version >= 13

    topics_out = []
    flushes: list[tuple[Any, asyncio.Future[None]]] = []
    any_error = False
    txn_id = req.transactional_id if version >= 3 else None
    txn_denied = txn_id is not None and txn_id != "" and not allowed(ctx, WRITE, TRANSACTIONAL_ID, txn_id)
    txn_coordinator = svc.transaction_coordinator
    for td in req.topic_data:
        parts_out = []
        if by_id:
            topic = store.get_by_id(td.topic_id)
            missing_error = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = store.get(td.name)
            missing_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        name = td.name if not by_id else (topic.name if topic is not None else None)
        denied = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if txn_denied
                  else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                  if name is not None and not allowed(ctx, WRITE, TOPIC, name) else 0)  # before existence
        for pd in td.partition_data:
            pr = PartResp(index=pd.index, error_code=0, base_offset=-1, log_append_time_ms=-1,
                          log_start_offset=-1, record_errors=[], error_message=None)
            parts_out.append(pr)
            if acks not in (0, 1, -1):
                pr.error_code = ErrorCode.INVALID_REQUIRED_ACKS
                any_error = True
                continue
            if denied:
                pr.error_code = denied
                any_error = True
                continue
            if topic is None:
                pr.error_code = missing_error
                any_error = True
                continue
            if topic.is_internal:
                pr.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                pr.error_message = f"Cannot append to internal topic {topic.name}"
                any_error = True
                continue
            p = rm.get_partition(topic.name, pd.index)
            if p is None:
                pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                any_error = True
                continue
            verify = None
            if txn_coordinator is not None and version >= 3:
                verify = _txn_verifier(txn_coordinator, txn_id, topic.name, pd.index)
            res: AppendResult = rm.append(p, pd.records, now_ms=now, verify_txn=verify, required_acks=acks)
            if res.error:
                any_error = True
                pr.error_code = res.error
                pr.error_message = res.error_message
                if res.record_errors:
                    pr.record_errors = [msg.BatchIndexAndErrorMessage(batch_index=i,
                                                                      batch_index_error_message=t)
                                        for i, t in res.record_errors]
                missing = res.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                pr.log_start_offset = -1 if missing else p.log_start_offset
                continue
            pr.base_offset = res.base_offset
            pr.log_append_time_ms = res.log_append_time
            pr.log_start_offset = res.log_start_offset
            if res.flush is not None:
                flushes.append((pr, res.flush))
        resp_topic = msg.TopicProduceResponse(partition_responses=parts_out)
        if by_id:
            resp_topic.topic_id = td.topic_id
        else:
            resp_topic.name = td.name
        topics_out.append(resp_topic)

    if acks == 0:
        if any_error:
            log.info("closing connection from %s:%d after an acks=0 produce with errors",
                     *ctx.connection.peer)
            ctx.connection.close()
        return None

    if flushes:
        timeout = req.timeout_ms / 1000.0 if acks == -1 and req.timeout_ms > 0 else None
        futs = list({id(f): f for _, f in flushes}.values())
        done, _pending = await asyncio.wait(futs, timeout=timeout)  # never cancels the shared futures
        for pr, f in flushes:
            if f not in done:
                pr.error_code = ErrorCode.REQUEST_TIMED_OUT
            elif isinstance(exc := f.exception(), KafkaError):  # cluster: NOT_ENOUGH_REPLICAS_AFTER_APPEND
                pr.error_code = error_code_of(exc)
            elif f.exception() is not None:
                log.error("fsync of %s failed: %s", pr.index, f.exception())
                pr.error_code = ErrorCode.KAFKA_STORAGE_ERROR
    return msg.new(responses=topics_out, throttle_time_ms=0)


def _txn_verifier(tc: Any, txn_id: str | None, topic: str, partition: int) -> Any:
    def verify(h: Any) -> int:
        return tc.verify_produce(txn_id, topic, partition, h.producer_id, h.producer_epoch)

    return verify
