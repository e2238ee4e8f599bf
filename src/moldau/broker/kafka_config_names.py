"""Kafka's own broker and topic config names, as data.

AlterConfigs / IncrementalAlterConfigs accept every name Kafka itself knows (a client or a test suite written
against Kafka may set any of them), store it and describe it; names that are not Kafka's are refused with
INVALID_CONFIG, as Kafka refuses them. The names moldau implements are defined with types, defaults and
validators in ``moldau.broker.config.BROKER_CONFIGS`` and ``moldau.log.config.TOPIC_CONFIGS``; the others
are accepted as strings and described as having no effect in moldau.

The lists are the config names defined by Apache Kafka 3.9's broker (``KafkaConfig``'s definitions, spread
over ``ServerConfigs``, ``KRaftConfigs``, ``ZkConfigs``, ``SocketServerConfigs``, ``ServerLogConfigs``,
``CleanerConfig``, ``ReplicationConfigs``, ``GroupCoordinatorConfig``, ``ShareGroupConfig``,
``TransactionLogConfig``, ``TransactionStateManagerConfig``, ``QuotaConfig``, ``BrokerSecurityConfigs``,
``SslConfigs``, ``SaslConfigs``, ``MetricConfigs``, ``RemoteLogManagerConfig``,
``DelegationTokenManagerConfigs``, ``PasswordEncoderConfigs``) plus the names Kafka 4.x added, and Kafka's
``TopicConfig`` / ``LogConfig`` topic names of 3.9 (which still include ``message.format.version``,
``message.downconversion.enable`` and ``message.timestamp.difference.max.ms``, removed in 4.0).
Listener-prefixed broker names (``listener.name.<listener>.<name>``) are Kafka names when ``<name>`` is.
"""

from __future__ import annotations

import re

__all__ = ["KAFKA_BROKER_CONFIG_NAMES", "KAFKA_TOPIC_CONFIG_NAMES", "is_kafka_broker_config_name",
           "is_kafka_topic_config_name"]

KAFKA_TOPIC_CONFIG_NAMES: frozenset[str] = frozenset("""
cleanup.policy compression.type compression.gzip.level compression.lz4.level compression.zstd.level
delete.retention.ms file.delete.delay.ms flush.messages flush.ms follower.replication.throttled.replicas
index.interval.bytes leader.replication.throttled.replicas local.retention.bytes local.retention.ms
max.compaction.lag.ms max.message.bytes message.downconversion.enable message.format.version
message.timestamp.after.max.ms message.timestamp.before.max.ms message.timestamp.difference.max.ms
message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms min.insync.replicas preallocate
remote.log.copy.disable remote.log.delete.on.disable remote.storage.enable retention.bytes retention.ms
segment.bytes segment.index.bytes segment.jitter.ms segment.ms unclean.leader.election.enable
""".split())  # noqa: SIM905 - data, one name per word

_BROKER = """
# ServerConfigs
broker.id broker.id.generation.enable reserved.broker.max.id message.max.bytes num.io.threads
background.threads num.replica.alter.log.dirs.threads queued.max.requests queued.max.request.bytes
request.timeout.ms socket.connection.setup.timeout.ms socket.connection.setup.timeout.max.ms
broker.heartbeat.interval.ms broker.session.timeout.ms broker.rack authorizer.class.name early.start.listeners
delete.topic.enable compression.type compression.gzip.level compression.lz4.level compression.zstd.level
controlled.shutdown.enable controlled.shutdown.max.retries controlled.shutdown.retry.backoff.ms
fetch.max.bytes max.incremental.fetch.session.cache.slots max.request.partition.size.limit
unstable.api.versions.enable unstable.feature.versions.enable unstable.metadata.versions.enable
inter.broker.protocol.version config.providers telemetry.max.bytes
# KRaftConfigs
process.roles node.id initial.broker.registration.timeout.ms metadata.log.dir
metadata.snapshot.max.new.record.bytes metadata.snapshot.max.interval.ms controller.listener.names
sasl.mechanism.controller.protocol metadata.log.segment.min.bytes metadata.log.segment.bytes
metadata.log.segment.ms metadata.max.retention.bytes metadata.max.retention.ms metadata.max.idle.interval.ms
metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
server.max.startup.time.ms migration.metadata.min.batch.size controller.performance.sample.period.ms
controller.performance.always.log.threshold.ms controller.quorum.voters controller.quorum.bootstrap.servers
controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
controller.quorum.election.backoff.max.ms controller.quorum.append.linger.ms
controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms controller.socket.timeout.ms
zookeeper.metadata.migration.enable zookeeper.metadata.migration.min.batch.size
# ZkConfigs
zookeeper.connect zookeeper.session.timeout.ms zookeeper.connection.timeout.ms
zookeeper.max.in.flight.requests zookeeper.set.acl zookeeper.ssl.client.enable zookeeper.clientCnxnSocket
zookeeper.ssl.keystore.location zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type
zookeeper.ssl.truststore.location zookeeper.ssl.truststore.password zookeeper.ssl.truststore.type
zookeeper.ssl.protocol zookeeper.ssl.enabled.protocols zookeeper.ssl.cipher.suites
zookeeper.ssl.endpoint.identification.algorithm zookeeper.ssl.crl.enable zookeeper.ssl.ocsp.enable
# SocketServerConfigs
listeners advertised.listeners listener.security.protocol.map control.plane.listener.name
socket.send.buffer.bytes socket.receive.buffer.bytes socket.request.max.bytes socket.listen.backlog.size
max.connections.per.ip max.connections.per.ip.overrides max.connections max.connection.creation.rate
connections.max.idle.ms connection.failed.authentication.delay.ms num.network.threads
# ServerLogConfigs, CleanerConfig
num.partitions log.dirs log.dir log.segment.bytes log.roll.ms log.roll.hours log.roll.jitter.ms
log.roll.jitter.hours log.retention.ms log.retention.minutes log.retention.hours log.retention.bytes
log.retention.check.interval.ms log.cleanup.policy log.index.size.max.bytes log.index.interval.bytes
log.flush.interval.messages log.segment.delete.delay.ms log.flush.scheduler.interval.ms log.flush.interval.ms
log.flush.offset.checkpoint.interval.ms log.flush.start.offset.checkpoint.interval.ms log.preallocate
log.message.format.version log.message.timestamp.type log.message.timestamp.difference.max.ms
log.message.timestamp.before.max.ms log.message.timestamp.after.max.ms num.recovery.threads.per.data.dir
auto.create.topics.enable min.insync.replicas create.topic.policy.class.name alter.config.policy.class.name
log.message.downconversion.enable log.dir.failure.timeout.ms log.initial.task.delay.ms
log.cleaner.threads log.cleaner.io.max.bytes.per.second log.cleaner.dedupe.buffer.size
log.cleaner.io.buffer.size log.cleaner.io.buffer.load.factor log.cleaner.backoff.ms
log.cleaner.min.cleanable.ratio log.cleaner.enable log.cleaner.delete.retention.ms
log.cleaner.min.compaction.lag.ms log.cleaner.max.compaction.lag.ms
# ReplicationConfigs
default.replication.factor replica.lag.time.max.ms replica.socket.timeout.ms
replica.socket.receive.buffer.bytes replica.fetch.max.bytes replica.fetch.wait.max.ms replica.fetch.min.bytes
replica.fetch.response.max.bytes replica.fetch.backoff.ms num.replica.fetchers
replica.high.watermark.checkpoint.interval.ms fetch.purgatory.purge.interval.requests
producer.purgatory.purge.interval.requests delete.records.purgatory.purge.interval.requests
auto.leader.rebalance.enable leader.imbalance.per.broker.percentage leader.imbalance.check.interval.seconds
unclean.leader.election.enable security.inter.broker.protocol inter.broker.listener.name
replica.selector.class
# GroupCoordinatorConfig, ShareGroupConfig
group.min.session.timeout.ms group.max.session.timeout.ms group.initial.rebalance.delay.ms group.max.size
offset.metadata.max.bytes offsets.load.buffer.size offsets.topic.replication.factor
offsets.topic.num.partitions offsets.topic.segment.bytes offsets.topic.compression.codec
offsets.retention.minutes offsets.retention.check.interval.ms offsets.commit.timeout.ms
offsets.commit.required.acks group.coordinator.rebalance.protocols group.coordinator.new.enable
group.coordinator.threads group.coordinator.append.linger.ms group.consumer.session.timeout.ms
group.consumer.min.session.timeout.ms group.consumer.max.session.timeout.ms
group.consumer.heartbeat.interval.ms group.consumer.min.heartbeat.interval.ms
group.consumer.max.heartbeat.interval.ms group.consumer.max.size group.consumer.assignors
group.consumer.migration.policy group.share.enable group.share.delivery.count.limit
group.share.record.lock.duration.ms group.share.min.record.lock.duration.ms
group.share.max.record.lock.duration.ms group.share.partition.max.record.locks
group.share.session.timeout.ms group.share.min.session.timeout.ms group.share.max.session.timeout.ms
group.share.heartbeat.interval.ms group.share.min.heartbeat.interval.ms group.share.max.heartbeat.interval.ms
group.share.max.groups group.share.max.size group.share.assignors share.fetch.purgatory.purge.interval.requests
# TransactionLogConfig, TransactionStateManagerConfig
transactional.id.expiration.ms transaction.max.timeout.ms transaction.state.log.min.isr
transaction.state.log.load.buffer.size transaction.state.log.replication.factor
transaction.state.log.num.partitions transaction.state.log.segment.bytes
transaction.abort.timed.out.transaction.cleanup.interval.ms
transaction.remove.expired.transaction.cleanup.interval.ms transaction.partition.verification.enable
producer.id.expiration.ms producer.id.expiration.check.interval.ms
# QuotaConfig (broker-level quota settings included)
quota.window.num quota.window.size.seconds replication.quota.window.num replication.quota.window.size.seconds
alter.log.dirs.replication.quota.window.num alter.log.dirs.replication.quota.window.size.seconds
controller.quota.window.num controller.quota.window.size.seconds client.quota.callback.class
leader.replication.throttled.rate follower.replication.throttled.rate
replica.alter.log.dirs.io.max.bytes.per.second
# BrokerSecurityConfigs, SslConfigs, SaslConfigs
principal.builder.class ssl.client.auth sasl.enabled.mechanisms sasl.server.callback.handler.class
sasl.server.max.receive.size ssl.principal.mapping.rules sasl.kerberos.principal.to.local.rules
connections.max.reauth.ms sasl.mechanism.inter.broker.protocol ssl.allow.dn.changes ssl.allow.san.changes
ssl.protocol ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keystore.type ssl.keystore.location
ssl.keystore.password ssl.key.password ssl.keystore.key ssl.keystore.certificate.chain ssl.truststore.type
ssl.truststore.location ssl.truststore.password ssl.truststore.certificates ssl.keymanager.algorithm
ssl.trustmanager.algorithm ssl.endpoint.identification.algorithm ssl.secure.random.implementation
ssl.engine.factory.class sasl.kerberos.service.name sasl.kerberos.kinit.cmd
sasl.kerberos.ticket.renew.window.factor sasl.kerberos.ticket.renew.jitter
sasl.kerberos.min.time.before.relogin sasl.login.refresh.window.factor sasl.login.refresh.window.jitter
sasl.login.refresh.min.period.seconds sasl.login.refresh.buffer.seconds sasl.jaas.config sasl.login.class
sasl.login.callback.handler.class sasl.login.connect.timeout.ms sasl.login.read.timeout.ms
sasl.login.retry.backoff.max.ms sasl.login.retry.backoff.ms sasl.oauthbearer.scope.claim.name
sasl.oauthbearer.sub.claim.name sasl.oauthbearer.token.endpoint.url sasl.oauthbearer.jwks.endpoint.url
sasl.oauthbearer.jwks.endpoint.refresh.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.clock.skew.seconds
sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
# DelegationTokenManagerConfigs, PasswordEncoderConfigs
delegation.token.master.key delegation.token.secret.key delegation.token.max.lifetime.ms
delegation.token.expiry.time.ms delegation.token.expiry.check.interval.ms password.encoder.secret
password.encoder.old.secret password.encoder.keyfactory.algorithm password.encoder.cipher.algorithm
password.encoder.key.length password.encoder.iterations
# MetricConfigs
metric.reporters metrics.num.samples metrics.sample.window.ms metrics.recording.level kafka.metrics.reporters
kafka.metrics.polling.interval.secs auto.include.jmx.reporter
# StandardAuthorizer
super.users allow.everyone.if.no.acl.found
# RemoteLogManagerConfig
remote.log.storage.system.enable remote.log.storage.manager.class.name remote.log.storage.manager.class.path
remote.log.storage.manager.impl.prefix remote.log.metadata.manager.class.name
remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
remote.log.metadata.manager.listener.name remote.log.index.file.cache.total.size.bytes
remote.log.manager.thread.pool.size remote.log.manager.task.interval.ms remote.log.manager.task.retry.backoff.ms
remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.jitter remote.log.reader.threads
remote.log.reader.max.pending.tasks remote.log.metadata.custom.metadata.max.bytes
remote.log.manager.copy.max.bytes.per.second remote.log.manager.copy.quota.window.num
remote.log.manager.copy.quota.window.size.seconds remote.log.manager.fetch.max.bytes.per.second
remote.log.manager.fetch.quota.window.num remote.log.manager.fetch.quota.window.size.seconds
remote.log.manager.copier.thread.pool.size remote.log.manager.expiration.thread.pool.size
remote.fetch.max.wait.ms log.local.retention.ms log.local.retention.bytes
# Kafka 4.x additions
group.coordinator.append.max.buffer.size group.share.persister.class.name share.coordinator.state.topic.num.partitions
share.coordinator.state.topic.replication.factor share.coordinator.state.topic.segment.bytes
share.coordinator.state.topic.min.isr share.coordinator.state.topic.compression.codec
share.coordinator.threads share.coordinator.snapshot.update.records.per.snapshot
share.coordinator.write.timeout.ms share.coordinator.load.buffer.size share.coordinator.append.linger.ms
group.streams.session.timeout.ms group.streams.min.session.timeout.ms group.streams.max.session.timeout.ms
group.streams.heartbeat.interval.ms group.streams.min.heartbeat.interval.ms
group.streams.max.heartbeat.interval.ms group.streams.max.size group.streams.num.standby.replicas
group.streams.max.standby.replicas group.consumer.regex.refresh.interval.ms
"""

KAFKA_BROKER_CONFIG_NAMES: frozenset[str] = frozenset(
    word for line in _BROKER.splitlines() if not line.startswith("#") for word in line.split())

_LISTENER_PREFIX = re.compile(r"^listener\.name\.[^.]+\.(?:[a-z0-9-]+\.)?(.+)$")


def is_kafka_topic_config_name(name: str) -> bool:
    return name in KAFKA_TOPIC_CONFIG_NAMES


def is_kafka_broker_config_name(name: str) -> bool:
    """A Kafka broker config name, also listener-prefixed (``listener.name.sasl_ssl.ssl.keystore.location``,
    ``listener.name.sasl_ssl.plain.sasl.jaas.config``: a SASL mechanism may follow the listener name)."""
    if name in KAFKA_BROKER_CONFIG_NAMES:
        return True
    m = _LISTENER_PREFIX.match(name)
    if m is None:
        return False
    rest = name[len("listener.name."):].split(".", 1)[1]
    return rest in KAFKA_BROKER_CONFIG_NAMES or m.group(1) in KAFKA_BROKER_CONFIG_NAMES
