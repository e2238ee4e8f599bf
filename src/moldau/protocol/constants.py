"""Enumerations of the Kafka protocol that are not error codes, in one place (as ``errors`` is for those).

Handlers compare request fields with these names instead of declaring integers of their own.
"""

from __future__ import annotations

from enum import IntEnum

#: the largest int32: "no limit" in Fetch v0-2 (max_bytes) and in many int configs
INT32_MAX = 2**31 - 1


class ConfigResourceType(IntEnum):
    """``resource_type`` of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs (Kafka's
    ``ConfigResource.Type``)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class EndpointType(IntEnum):
    """``endpoint_type`` of DescribeCluster v1+ (KIP-919)."""

    BROKER = 1
    CONTROLLER = 2
