"""SaslHandshake (key 17), v0-1.

* Only on SASL listeners (SASL_PLAINTEXT, SASL_SSL); elsewhere ILLEGAL_SASL_STATE, as Kafka answers an
  already authenticated connection.
* The answer lists the listener's enabled mechanisms. An unknown mechanism: UNSUPPORTED_SASL_MECHANISM and
  the connection closes after the answer (as Kafka).
* v0: the next frames are bare SASL tokens (size-prefixed, no Kafka header); v1: SaslAuthenticate requests.
* After authentication a second handshake starts a KIP-368 re-authentication (v1, same mechanism); a handshake
  out of order: ILLEGAL_SASL_STATE, then close.
"""

from __future__ import annotations

import logging
from typing import Any

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

from ..context import RequestContext
from ..registry import handler
from ..security.sasl import FAILED, close_soon

log = logging.getLogger(__name__)



def _close_after_answer(conn: Any) -> None:
    if conn.auth is not None:
        conn.auth.state = FAILED  # drop what else arrives
    close_soon(conn)


@handler(api_key=17, min_version=0, max_version=1)
async def sasl_handshake(ctx: RequestContext, req: m.SaslHandshakeRequest) -> m.SaslHandshakeResponse:
    conn = ctx.connection
    auth = conn.auth
    if auth is None:
        return m.SaslHandshakeResponse.new(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    mechanism = req.mechanism or ""
    error = auth.handshake(mechanism, ctx.version)
    if error == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        log.warning("closing connection from %s:%d (%s): SASL mechanism %r is not enabled (enabled: %s)",
                    conn.peer[0], conn.peer[1], conn.listener_name, mechanism, ", ".join(auth.mechanisms))
        _close_after_answer(conn)
    elif error:
        log.warning("closing connection from %s:%d (%s): SaslHandshake v%d for %r in an illegal SASL state",
                    conn.peer[0], conn.peer[1], conn.listener_name, ctx.version, mechanism)
        _close_after_answer(conn)
    return m.SaslHandshakeResponse.new(error_code=error, mechanisms=list(auth.mechanisms))
