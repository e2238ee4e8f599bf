"""ApiVersions (key 18), v0-4.

* The answer lists exactly the served APIs and their version ranges (moldau.broker.registry.SERVED, which
  every handler's registration is checked against).
* v3+ requests carry the client's software name and version (KIP-511); they are validated like Kafka does
  (``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?``, INVALID_REQUEST otherwise) and kept on the connection.
* v3+ responses: supported features and finalized features are empty (a single-node broker has no feature
  levels to negotiate), FinalizedFeaturesEpoch -1.
* An unsupported version (librdkafka may send a newer one) is answered by the router with
  UNSUPPORTED_VERSION and a v0 body carrying ApiVersions' own version range only, as Kafka answers
  (KIP-511, ``ApiVersionsRequest.getErrorResponse``): the client asks again at a version both know.
"""

from __future__ import annotations

import re
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import SERVED, handler

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
_cache: list[Any] | None = None


def _api_keys() -> list[Any]:
    global _cache
    if _cache is None:
        mk = m.ApiVersionsResponse.ApiVersion
        _cache = [mk(api_key=key, min_version=lo, max_version=hi) for key, (_module, lo, hi) in
                  sorted(SERVED.items())]
    return _cache


@handler(api_key=18, min_version=0, max_version=4)
async def api_versions(ctx: RequestContext, req: m.ApiVersionsRequest) -> m.ApiVersionsResponse:
    error = 0
    if ctx.version >= 3:
        name = req.client_software_name or ""
        version = req.client_software_version or ""
        if not (_SOFTWARE.match(name) and _SOFTWARE.match(version)):
            error = ErrorCode.INVALID_REQUEST
        else:
            ctx.connection.client_software = (name, version)
    return m.ApiVersionsResponse.new(error_code=error, api_keys=[] if error else _api_keys(),
                                     throttle_time_ms=0)
