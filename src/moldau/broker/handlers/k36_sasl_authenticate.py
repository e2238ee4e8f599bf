"""SaslAuthenticate (key 36), v0-2.

* After SaslHandshake v1 on a SASL listener; each request carries the client's next SASL token and the answer
  the server's (PLAIN: one round, SCRAM: two).
* Wrong credentials or a malformed exchange: SASL_AUTHENTICATION_FAILED with a message, logged, answered after
  ``connection.failed.authentication.delay.ms``; the connection closes that long after the answer (as Kafka,
  which delays the close), requests arriving meanwhile are dropped.
* Out of order (no handshake, v0 handshake, already complete, not a SASL listener): ILLEGAL_SASL_STATE, close.
* v1+: session_lifetime_ms = ``connections.max.reauth.ms`` (0 = no expiry). When set, the client must
  re-authenticate (KIP-368) before the session ends, or its next request closes the connection.
"""

from __future__ import annotations

import logging

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl_mechanisms import SaslError

from ..context import RequestContext
from ..registry import handler
from ..security.sasl import FAILED, SaslAuthenticationFailed, close_soon

log = logging.getLogger(__name__)



@handler(api_key=36, min_version=0, max_version=2)
async def sasl_authenticate(ctx: RequestContext,
                            req: m.SaslAuthenticateRequest) -> m.SaslAuthenticateResponse:
    conn = ctx.connection
    auth = conn.auth
    resp = m.SaslAuthenticateResponse.new(error_code=0, error_message=None, auth_bytes=b"",
                                          session_lifetime_ms=0)
    if auth is None:
        resp.error_code = ErrorCode.ILLEGAL_SASL_STATE
        resp.error_message = "SaslAuthenticate request received on a listener without SASL"
        close_soon(conn)
        return resp
    try:
        out = auth.authenticate(conn, bytes(req.auth_bytes or b""))
    except SaslAuthenticationFailed as e:
        auth.log_failure(conn, e)
        await auth.failure_delay()
        resp.error_code = ErrorCode.SASL_AUTHENTICATION_FAILED
        resp.error_message = str(e)
        # close a little after the answer, so that it is read before the end of the stream (as Kafka, which
        # delays the close); requests arriving meanwhile are dropped (the session is FAILED)
        auth.close_later(conn)
        return resp
    except SaslError as e:
        log.warning("closing connection from %s:%d (%s): %s", conn.peer[0], conn.peer[1], conn.listener_name,
                    e)
        resp.error_code = ErrorCode.ILLEGAL_SASL_STATE
        resp.error_message = str(e)
        auth.state = FAILED
        close_soon(conn)
        return resp
    resp.auth_bytes = out or b""
    if auth.state == "authenticated":
        resp.session_lifetime_ms = auth.session_lifetime_ms()
    return resp
