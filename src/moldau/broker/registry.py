"""Handler registry: api key -> HandlerSpec. Handlers register themselves with ``@handler``.

ApiVersions is built from this registry, so what is registered is exactly what is advertised.

    @handler(api_key=0, min_version=0, max_version=13)
    async def produce(ctx: RequestContext, req: m.ProduceRequest) -> m.ProduceResponse | None: ...

The router decodes the request with ``messages.REQUESTS[api_key]`` and encodes the returned object with
``messages.RESPONSES[api_key]`` at ``ctx.version``. ``None`` means no response (acks=0).
"""

from __future__ import annotations

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


HANDLERS: dict[int, HandlerSpec] = {}


def handler(api_key: int, min_version: int, max_version: int) -> Callable[[HandlerFn], HandlerFn]:
    """Register ``fn`` as the handler of ``api_key`` for versions ``min_version..max_version``."""
    if min_version > max_version:
        raise ValueError(f"api {api_key}: min_version {min_version} > max_version {max_version}")

    def deco(fn: HandlerFn) -> HandlerFn:
        existing = HANDLERS.get(api_key)
        if existing is not None and existing.fn is not fn and existing.fn.__qualname__ != fn.__qualname__:
            raise ValueError(f"api key {api_key} registered twice ({existing.name} and {fn.__name__})")
        HANDLERS[api_key] = HandlerSpec(api_key, fn.__name__, min_version, max_version, fn)
        return fn

    return deco
