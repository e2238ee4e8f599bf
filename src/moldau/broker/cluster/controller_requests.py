"""The controller's requests to the brokers (Kafka's ``ControllerBrokerRequestBatch`` over the
``ControllerChannelManager``): LeaderAndIsr to a partition's replicas, UpdateMetadata to every broker,
StopReplica (with delete) to replicas reassigned away or of a deleted topic. Built from the
``ControllerContext``, sent on its channel without waiting (the futures are returned where a caller waits).
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.protocol import messages as m

from .controller_context import TP, ControllerContext

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
NO_EPOCH = -1  # StopReplica v3: stop whatever leader epoch the replica has (a replica reassigned away)
EPOCH_DURING_DELETE = -2  # StopReplica v3: the topic is being deleted

SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def stop_replica_request(
    controller_id: int, controller_epoch: int, topic: str, partitions: list[int], leader_epoch: int
) -> m.StopReplicaRequest:
    """StopReplica v3 with delete for some partitions of one topic (per-partition delete flags, KIP-570)."""
    return m.StopReplicaRequest.new(
        controller_id=controller_id, controller_epoch=controller_epoch, broker_epoch=-1,
        topic_states=[m.StopReplicaRequest.StopReplicaTopicState(
            topic_name=topic,
            partition_states=[m.StopReplicaRequest.StopReplicaPartitionState(
                partition_index=p, leader_epoch=leader_epoch, delete_partition=True) for p in partitions],
        )],
    )


class ControllerRequests:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    def send(self, broker_id: int, api_key: int, version: int, req: Any) -> asyncio.Future[Any] | None:
        channel = self.ctx.channel
        if channel is None:
            return None
        return channel.send(broker_id, api_key, version, req)

    def stop_replica(self, broker_id: int, topic: str, partitions: list[int], leader_epoch: int) -> None:
        """StopReplica with delete (``leader_epoch``: ``NO_EPOCH`` or ``EPOCH_DURING_DELETE``)."""
        ctx = self.ctx
        self.send(broker_id, 5, STOP_REPLICA_VERSION,
                  stop_replica_request(ctx.broker_id, ctx.epoch, topic, partitions, leader_epoch))

    def _request_header(self) -> dict[str, Any]:
        """The fields LeaderAndIsr and UpdateMetadata (v5+) start with: this controller and its epoch."""
        return {"controller_id": self.ctx.broker_id, "controller_epoch": self.ctx.epoch, "broker_epoch": -1,
                "max_broker_epoch": -1, "ungrouped_partition_states": []}

    def _partition_fields(self, tp: TP) -> dict[str, Any] | None:
        """The fields LeaderAndIsr's and UpdateMetadata's partition states share (None: unknown partition)."""
        st = self.ctx.states.get(tp)
        a = self.ctx.assignments.get(tp[0])
        if st is None or a is None:
            return None
        return {"partition_index": tp[1], "controller_epoch": st.controller_epoch, "leader": st.leader,
                "leader_epoch": st.leader_epoch, "isr": list(st.isr), "zk_version": st.zk_version,
                "replicas": list(a.partitions.get(tp[1], []))}

    def leader_and_isr(self, tp: TP, only: list[int] | None = None) -> list[asyncio.Future[Any]]:
        """LeaderAndIsr for ``tp`` to its live replicas (or to the live ones of ``only``)."""
        fields = self._partition_fields(tp)
        if fields is None:
            return []
        live_brokers = self.ctx.live
        st = self.ctx.states[tp]
        replicas = fields["replicas"]
        Req = m.LeaderAndIsrRequest
        ps = Req.LeaderAndIsrPartitionState(**fields, adding_replicas=[], removing_replicas=[], is_new=False)
        leaders = []
        if st.leader in live_brokers:
            info = live_brokers[st.leader]
            ep = info.endpoint(self.ctx.listener_name) or info.endpoints[0]
            leaders.append(Req.LeaderAndIsrLiveLeader(broker_id=st.leader, host_name=ep.host, port=ep.port))
        req = Req.new(
            **self._request_header(),
            topic_states=[Req.LeaderAndIsrTopicState(topic_name=tp[0], partition_states=[ps])],
            live_leaders=leaders,
        )
        futs = []
        for b in only if only is not None else replicas:
            if b in live_brokers:
                f = self.send(b, 4, LEADER_AND_ISR_VERSION, req)
                if f is not None:
                    futs.append(f)
        return futs

    def update_metadata(self, brokers: list[int], tps: list[TP]) -> None:
        """UpdateMetadata to ``brokers``: the states of ``tps`` and every live broker."""
        Req = m.UpdateMetadataRequest
        by_topic: dict[str, list[Any]] = {}
        for tp in tps:
            fields = self._partition_fields(tp)
            if fields is None:
                continue
            offline = [r for r in fields["replicas"] if r not in self.ctx.live]
            by_topic.setdefault(tp[0], []).append(
                Req.UpdateMetadataPartitionState(**fields, offline_replicas=offline))
        live = []
        for info in sorted(self.ctx.live.values(), key=lambda i: i.broker_id):
            live.append(
                Req.UpdateMetadataBroker(
                    id=info.broker_id,
                    v0_host="",
                    v0_port=0,
                    rack=info.rack,
                    endpoints=[
                        Req.UpdateMetadataEndpoint(
                            port=ep.port,
                            host=ep.host,
                            listener=ep.listener,
                            security_protocol=SECURITY_PROTOCOLS.get(ep.security_protocol, 0),
                        )
                        for ep in info.endpoints
                    ],
                )
            )
        req = Req.new(
            **self._request_header(),
            topic_states=[
                Req.UpdateMetadataTopicState(topic_name=t, partition_states=ps)
                for t, ps in sorted(by_topic.items())
            ],
            live_brokers=live,
        )
        for b in brokers:
            self.send(b, 6, UPDATE_METADATA_VERSION, req)
