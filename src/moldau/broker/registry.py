"""Handler registry: api key -> HandlerSpec. Handlers register themselves with ``@handler``.

    @handler(api_key=0, min_version=0, max_version=13)
    async def produce(ctx: RequestContext, req: m.ProduceRequest) -> m.ProduceResponse | None: ...

``SERVED`` lists every API the broker serves: its handler module (``moldau.broker.handlers.kNN_*``) and the
versions. ApiVersions answers from it, and a handler module is imported on the first request of its API
(``load_handler``), so a broker starts without importing the 57 handler modules, and a process imports only
those of the APIs its clients use. ``@handler`` refuses a version range other than the one ``SERVED`` lists
(and an API it does not list), so what is advertised is exactly what is registered; ``load_all`` imports every
handler module (tests and tools/gen_api_docs.py).

The router decodes the request with ``messages.REQUESTS[api_key]`` and encodes the returned object with
``messages.RESPONSES[api_key]`` at ``ctx.version``. ``None`` means no response (acks=0).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from .context import RequestContext

# (context, the decoded request of the handler's own message class) -> the response, or None
HandlerFn = Callable[["RequestContext", Any], Awaitable[Any]]


@dataclass(slots=True, frozen=True)
class HandlerSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    fn: HandlerFn


#: api key -> (module in moldau.broker.handlers, min version, max version): every API the broker serves
SERVED: dict[int, tuple[str, int, int]] = {
    0: ("k00_produce", 0, 13),
    1: ("k01_fetch", 0, 18),
    2: ("k02_list_offsets", 0, 11),
    3: ("k03_metadata", 0, 13),
    4: ("k04_leader_and_isr", 2, 5),
    5: ("k05_stop_replica", 1, 3),
    6: ("k06_update_metadata", 5, 7),
    7: ("k07_controlled_shutdown", 1, 3),
    8: ("k08_offset_commit", 0, 10),
    9: ("k09_offset_fetch", 0, 10),
    10: ("k10_find_coordinator", 0, 6),
    11: ("k11_join_group", 0, 9),
    12: ("k12_heartbeat", 0, 4),
    13: ("k13_leave_group", 0, 5),
    14: ("k14_sync_group", 0, 5),
    15: ("k15_describe_groups", 0, 6),
    16: ("k16_list_groups", 0, 5),
    17: ("k17_sasl_handshake", 0, 1),
    18: ("k18_api_versions", 0, 4),
    19: ("k19_create_topics", 0, 7),
    20: ("k20_delete_topics", 0, 6),
    21: ("k21_delete_records", 0, 2),
    22: ("k22_init_producer_id", 0, 6),
    23: ("k23_offset_for_leader_epoch", 0, 4),
    24: ("k24_add_partitions_to_txn", 0, 5),
    25: ("k25_add_offsets_to_txn", 0, 4),
    26: ("k26_end_txn", 0, 5),
    27: ("k27_write_txn_markers", 0, 2),
    28: ("k28_txn_offset_commit", 0, 5),
    29: ("k29_describe_acls", 0, 3),
    30: ("k30_create_acls", 0, 3),
    31: ("k31_delete_acls", 0, 3),
    32: ("k32_describe_configs", 0, 4),
    33: ("k33_alter_configs", 0, 2),
    34: ("k34_alter_replica_log_dirs", 0, 2),
    35: ("k35_describe_log_dirs", 0, 5),
    36: ("k36_sasl_authenticate", 0, 2),
    37: ("k37_create_partitions", 0, 3),
    42: ("k42_delete_groups", 0, 2),
    43: ("k43_elect_leaders", 0, 2),
    44: ("k44_incremental_alter_configs", 0, 1),
    45: ("k45_alter_partition_reassignments", 0, 1),
    46: ("k46_list_partition_reassignments", 0, 0),
    47: ("k47_offset_delete", 0, 0),
    48: ("k48_describe_client_quotas", 0, 1),
    49: ("k49_alter_client_quotas", 0, 1),
    50: ("k50_describe_user_scram_credentials", 0, 0),
    51: ("k51_alter_user_scram_credentials", 0, 0),
    56: ("k56_alter_partition", 0, 3),
    60: ("k60_describe_cluster", 0, 2),
    61: ("k61_describe_producers", 0, 0),
    65: ("k65_describe_transactions", 0, 0),
    66: ("k66_list_transactions", 0, 2),
    68: ("k68_consumer_group_heartbeat", 0, 1),
    69: ("k69_consumer_group_describe", 0, 1),
    74: ("k74_list_config_resources", 0, 1),
    75: ("k75_describe_topic_partitions", 0, 0),
    76: ("k76_share_group_heartbeat", 1, 1),
    77: ("k77_share_group_describe", 1, 1),
    78: ("k78_share_fetch", 1, 2),
    79: ("k79_share_acknowledge", 1, 2),
    83: ("k83_initialize_share_group_state", 0, 0),
    84: ("k84_read_share_group_state", 0, 0),
    85: ("k85_write_share_group_state", 0, 1),
    86: ("k86_delete_share_group_state", 0, 0),
    87: ("k87_read_share_group_state_summary", 0, 1),
    90: ("k90_describe_share_group_offsets", 0, 1),
    91: ("k91_alter_share_group_offsets", 0, 0),
    92: ("k92_delete_share_group_offsets", 0, 0),
}

#: the handlers loaded so far (the router's lookup); load_handler adds the others on first use
HANDLERS: dict[int, HandlerSpec] = {}
_BROKEN: set[int] = set()  # api keys whose module failed to load (logged once, then not served)
log = logging.getLogger(__name__)


def handler(api_key: int, min_version: int, max_version: int) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``api_key`` for versions ``min_version..max_version``."""
    if min_version > max_version:
        raise ValueError(f"api {api_key}: min_version {min_version} > max_version {max_version}")

    served = SERVED.get(api_key)
    if served is None:
        raise ValueError(f"api key {api_key} is not in moldau.broker.registry.SERVED")
    if served[1:] != (min_version, max_version):
        raise ValueError(f"api key {api_key}: the handler serves versions {min_version}-{max_version}, "
                         f"SERVED lists {served[1]}-{served[2]}")

    def deco(fn: HandlerFn) -> HandlerFn:
        existing = HANDLERS.get(api_key)
        if existing is not None and existing.fn is not fn and existing.fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"api key {api_key} registered twice ({existing.name} and {fn.__name__})")
        HANDLERS[api_key] = HandlerSpec(api_key, fn.__name__, min_version, max_version, fn)
        return fn

    return deco


def load_handler(api_key: int) -> HandlerSpec | None:
    """The handler of ``api_key``, its module imported on first use; None for an API the broker does not serve
    (or whose module does not load: logged once; a broken module must not take the whole broker down)."""
    spec = HANDLERS.get(api_key)
    if spec is not None:
        return spec
    served = SERVED.get(api_key)
    if served is None or api_key in _BROKEN:
        return None
    try:
        importlib.import_module(f"moldau.broker.handlers.{served[0]}")
    except Exception:
        _BROKEN.add(api_key)
        log.exception("cannot load handler module %s", served[0])
        return None
    spec = HANDLERS.get(api_key)
    if spec is None:
        _BROKEN.add(api_key)
        log.error("handler module %s registers no handler for api key %d", served[0], api_key)
    return spec


def load_all() -> dict[int, HandlerSpec]:
    """Import every served API's handler module; the registry (HANDLERS)."""
    for api_key in SERVED:
        load_handler(api_key)
    return HANDLERS
