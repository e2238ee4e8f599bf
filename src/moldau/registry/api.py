"""The HTTP routes of Confluent's Schema Registry REST API (aiohttp), over ``service.Registry``.

Answers are ``application/vnd.schemaregistry.v1+json``; errors are ``{"error_code": ..., "message": ...}``
with Confluent's codes. Request bodies are accepted as JSON whatever their content type says, as Confluent's
registry does for its three JSON types and plain ``application/json``."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .service import Registry, RestError, parse_version, schema_not_found, subject_not_found
from .store import StoreError

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(body).encode(), content_type=CONTENT_TYPE)


def _error(status: int, code: int, message: str) -> web.Response:
    return reply({"error_code": code, "message": message}, status)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise RestError(422, 42201, "Invalid request: empty body")
    try:
        return json.loads(raw)
    except ValueError as e:
        raise RestError(400, 400, f"Unrecognized JSON body: {e}") from None


def _basic_user(header: str, users: dict[str, tuple[str, str]]) -> str | None:
    import base64
    import binascii
    import hmac

    if not header.startswith("Basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    known = users.get(user)
    if known is None or not hmac.compare_digest(password.encode(), known[0].encode()):
        return None
    return user


def _deleted_only(request: web.Request) -> bool:
    return _flag(request, "deletedOnly") or _flag(request, "deleted_only")


def _page(request: web.Request, items: list[Any]) -> list[Any]:
    """``offset`` and ``limit`` (negative: no limit) of Confluent's list answers."""
    offset = max(_int(request.query.get("offset", "0"), "offset"), 0)
    limit = _int(request.query.get("limit", "-1"), "limit")
    return items[offset:] if limit < 0 else items[offset : offset + limit]


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RestError(404, 404, f"HTTP 404 Not Found: {what} {text!r} is not a number") from None


FORWARDED = "X-Moldau-Registry-Forwarded"


def _is_write(request: web.Request) -> bool:
    if request.method in ("PUT", "DELETE"):
        return True
    resource = request.match_info.route.resource
    return (
        request.method == "POST"
        and resource is not None
        and resource.canonical == "/subjects/{subject}/versions"
    )


class RegistryAPI:
    def __init__(
        self,
        registry: Registry,
        elector: Any = None,
        users: dict[str, tuple[str, str]] | None = None,
        tls_ca: str | None = None,
    ) -> None:
        self.r = registry
        self.elector = elector  # election.LeaderElector, or None: this instance writes itself
        self.users = users or {}
        self.tls_ca = tls_ca
        self._session: Any = None
        # (method, route, status) -> [requests, seconds]
        self.requests: dict[tuple[str, str, int], list[float]] = {}

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._count, self._auth, self._errors], client_max_size=16 * 1024 * 1024
        )
        g, p, u, d = app.router.add_get, app.router.add_post, app.router.add_put, app.router.add_delete
        g("/", self.root)
        g("/subjects", self.subjects)
        g("/subjects/{subject}/versions", self.versions)
        p("/subjects/{subject}/versions", self.register)
        p("/subjects/{subject}", self.lookup)
        d("/subjects/{subject}", self.delete_subject)
        g("/subjects/{subject}/versions/{version}", self.get_version)
        g("/subjects/{subject}/versions/{version}/schema", self.get_version_schema)
        g("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        d("/subjects/{subject}/versions/{version}", self.delete_version)
        g("/schemas", self.schemas)
        g("/schemas/types", self.schema_types)
        g("/schemas/ids/{id}", self.schema_by_id)
        g("/schemas/ids/{id}/schema", self.schema_by_id_raw)
        g("/schemas/ids/{id}/subjects", self.schema_subjects)
        g("/schemas/ids/{id}/versions", self.schema_versions)
        p("/compatibility/subjects/{subject}/versions/{version}", self.compat_version)
        p("/compatibility/subjects/{subject}/versions", self.compat_all)
        for path in ("/config", "/config/{subject}"):
            g(path, self.get_config)
            u(path, self.put_config)
            d(path, self.delete_config)
        for path in ("/mode", "/mode/{subject}"):
            g(path, self.get_mode)
            u(path, self.put_mode)
        d("/mode/{subject}", self.delete_mode)
        g("/contexts", self.contexts)
        g("/metrics", self.metrics)
        return app

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _forward(self, request: web.Request) -> web.StreamResponse | None:
        """A write on a follower goes to the leader (None: this instance leads)."""
        if self.elector is None or self.elector.is_leader:
            return None
        if request.headers.get(FORWARDED):
            raise RestError(
                500,
                50003,
                "Error while forwarding the request to the leader: this instance is not the leader either",
            )
        leader = await self.elector.leader_url()
        if leader is None:
            raise RestError(500, 50004, "Unknown leader: no schema registry instance leads the group")
        if leader == self.elector.url:
            return None
        import aiohttp

        if self._session is None:
            ssl_ctx: Any = None
            if self.tls_ca:
                import ssl

                ssl_ctx = ssl.create_default_context(cafile=self.tls_ca)
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=60), connector=aiohttp.TCPConnector(ssl=ssl_ctx or True)
            )
        body = await request.read()
        headers = {"Content-Type": request.headers.get("Content-Type", CONTENT_TYPE), FORWARDED: "1"}
        if "Authorization" in request.headers:  # the leader checks the same user
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._session.request(
                request.method, leader + request.path_qs, data=body, headers=headers
            ) as resp:
                data = await resp.read()
                return web.Response(
                    status=resp.status, body=data, content_type=resp.content_type or CONTENT_TYPE
                )
        except (aiohttp.ClientError, TimeoutError) as e:
            await self.elector.leader_url(refresh=True, timeout=0)
            raise RestError(
                500, 50003, f"Error while forwarding the request to the leader {leader}: {e}"
            ) from None

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        t0 = time.perf_counter()
        resp = await handler(request)
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "other"
        c = self.requests.setdefault((request.method, route, resp.status), [0, 0.0])
        c[0] += 1
        c[1] += time.perf_counter() - t0
        return resp

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text format: requests and their time by method, route and status; subjects, versions,
        schemas, the highest id, the offset of ``_schemas`` applied, whether this instance leads."""
        st = self.r.state
        lines = ["# TYPE moldau_registry_requests_total counter"]
        labels = {k: f'method="{k[0]}",route="{k[1]}",status="{k[2]}"' for k in self.requests}
        for key, (n, _) in sorted(self.requests.items()):
            lines.append(f"moldau_registry_requests_total{{{labels[key]}}} {n:.0f}")
        lines.append("# TYPE moldau_registry_request_seconds_total counter")
        for key, (_, secs) in sorted(self.requests.items()):
            lines.append(f"moldau_registry_request_seconds_total{{{labels[key]}}} {secs:.6f}")
        versions = sum(len(v) for v in st.subjects.values())
        leader = 1 if self.elector is None or self.elector.is_leader else 0
        for name, value in (
            ("subjects", len(st.subject_names())),
            ("versions", versions),
            ("schemas", len(st.ids)),
            ("max_schema_id", st.max_id),
            ("applied_offset", st.applied_offset),
            ("leader", leader),
        ):
            lines += [f"# TYPE moldau_registry_{name} gauge", f"moldau_registry_{name} {value}"]
        return web.Response(
            text="\n".join(lines) + "\n",
            content_type="text/plain",
            headers={"X-Content-Type-Options": "nosniff"},
        )

    @web.middleware
    async def _auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """HTTP basic auth when users are configured; a ``readonly`` user may read, look up and check
        compatibility, not change anything (Confluent answers 40301 there)."""
        if not self.users:
            return await handler(request)
        user = _basic_user(request.headers.get("Authorization", ""), self.users)
        if user is None:
            resp = _error(401, 401, "Unauthorized")
            resp.headers["WWW-Authenticate"] = 'Basic realm="moldau schema registry"'
            return resp
        if self.users[user][1] != "admin" and _is_write(request):
            return _error(403, 40301, f"User {user} is denied operation {request.method} on {request.path}")
        return await handler(request)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if _is_write(request):
                forwarded = await self._forward(request)
                if forwarded is not None:
                    return forwarded
            return await handler(request)
        except RestError as e:
            return _error(e.status, e.code, e.message)
        except StoreError as e:
            log.warning("schema registry: %s", e)
            return _error(500, 50001, f"Error in the backend data store: {e}")
        except web.HTTPException as e:
            if e.status >= 400:
                return _error(e.status, e.status, f"HTTP {e.status} {e.reason}")
            raise
        except Exception as e:  # a bug: answer, log, keep serving
            log.exception("schema registry: %s %s", request.method, request.path)
            return _error(500, 50001, f"Internal error: {type(e).__name__}")

    # ----------------------------------------------------------------------------------------- subjects
    async def root(self, request: web.Request) -> web.Response:
        return reply({})

    async def subjects(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        if _deleted_only(request):
            live = set(self.r.list_subjects(False, prefix))
            return reply(_page(request, [s for s in self.r.list_subjects(True, prefix) if s not in live]))
        return reply(_page(request, self.r.list_subjects(_flag(request, "deleted"), prefix)))

    async def versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        if _deleted_only(request):
            vs = self.r.state.versions(subject, deleted=True)
            if not vs:
                raise subject_not_found(subject)
            return reply(_page(request, [v.version for v in vs if v.deleted]))
        return reply(_page(request, self.r.list_versions(subject, _flag(request, "deleted"))))

    async def register(self, request: web.Request) -> web.Response:
        return reply(
            await self.r.register(
                request.match_info["subject"], await _body(request), _flag(request, "normalize")
            )
        )

    async def lookup(self, request: web.Request) -> web.Response:
        v = self.r.lookup(request.match_info["subject"], await _body(request), _flag(request, "deleted"))
        return reply(v.body())

    async def delete_subject(self, request: web.Request) -> web.Response:
        return reply(await self.r.delete_subject(request.match_info["subject"], _flag(request, "permanent")))

    def _formatted(self, request: web.Request, v: Any, body: dict[str, Any]) -> dict[str, Any]:
        """``format=serialized``: a Protobuf schema as a base64 ``FileDescriptorProto``."""
        if request.query.get("format") == "serialized" and v.schema_type == "PROTOBUF":
            body["schema"] = self.r.parse_version_of(v).obj.serialized()
        return body

    async def get_version(self, request: web.Request) -> web.Response:
        v = self.r.get_version(
            request.match_info["subject"],
            parse_version(request.match_info["version"]),
            _flag(request, "deleted"),
        )
        return reply(self._formatted(request, v, v.body()))

    async def get_version_schema(self, request: web.Request) -> web.Response:
        v = self.r.get_version(
            request.match_info["subject"],
            parse_version(request.match_info["version"]),
            _flag(request, "deleted"),
        )
        return web.Response(text=v.schema, content_type=CONTENT_TYPE)

    async def referenced_by(self, request: web.Request) -> web.Response:
        v = self.r.get_version(request.match_info["subject"], parse_version(request.match_info["version"]))
        return reply(_page(request, self.r.state.referenced_by(v.subject, v.version)))

    async def delete_version(self, request: web.Request) -> web.Response:
        return reply(
            await self.r.delete_version(
                request.match_info["subject"],
                parse_version(request.match_info["version"]),
                _flag(request, "permanent"),
            )
        )

    # ----------------------------------------------------------------------------------------- schemas
    async def schemas(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        deleted = _flag(request, "deleted")
        latest_only = _flag(request, "latestOnly")
        out = []
        for s in self.r.list_subjects(deleted, prefix):
            vs = self.r.state.versions(s, deleted)
            out += [v.body() for v in (vs[-1:] if latest_only else vs)]
        return reply(_page(request, out))

    async def schema_types(self, request: web.Request) -> web.Response:
        return reply(sorted(self.r.types))

    def _by_id(self, request: web.Request) -> Any:
        sid = _int(request.match_info["id"], "id")
        v = self.r.state.by_id(sid)
        if v is None:
            raise schema_not_found(sid)
        return v

    async def schema_by_id(self, request: web.Request) -> web.Response:
        v = self._by_id(request)
        body = v.body(with_subject=False)
        body.pop("id", None)
        return reply(self._formatted(request, v, body))

    async def schema_by_id_raw(self, request: web.Request) -> web.Response:
        return web.Response(text=self._by_id(request).schema, content_type=CONTENT_TYPE)

    async def schema_subjects(self, request: web.Request) -> web.Response:
        v = self._by_id(request)
        users = self.r.state.users_of(v.id, _flag(request, "deleted"))
        return reply(_page(request, sorted({u.subject for u in users})))

    async def schema_versions(self, request: web.Request) -> web.Response:
        v = self._by_id(request)
        users = self.r.state.users_of(v.id, _flag(request, "deleted"))
        return reply(_page(request, [{"subject": u.subject, "version": u.version} for u in users]))

    # ----------------------------------------------------------------------------------------- compatibility
    def _compat_reply(self, request: web.Request, msgs: list[str]) -> web.Response:
        body: dict[str, Any] = {"is_compatible": not msgs}
        if _flag(request, "verbose"):
            body["messages"] = msgs
        return reply(body)

    async def compat_version(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        version = parse_version(request.match_info["version"])
        body = await _body(request)
        return self._compat_reply(request, self.r.test_compatibility(subject, version, body))

    async def compat_all(self, request: web.Request) -> web.Response:
        body = await _body(request)
        return self._compat_reply(
            request, self.r.test_compatibility(request.match_info["subject"], None, body)
        )

    # ----------------------------------------------------------------------------------------- config, mode
    async def get_config(self, request: web.Request) -> web.Response:
        return reply(self.r.get_config(request.match_info.get("subject"), _flag(request, "defaultToGlobal")))

    async def put_config(self, request: web.Request) -> web.Response:
        return reply(await self.r.set_config(request.match_info.get("subject"), await _body(request)))

    async def delete_config(self, request: web.Request) -> web.Response:
        return reply(await self.r.delete_config(request.match_info.get("subject")))

    async def get_mode(self, request: web.Request) -> web.Response:
        return reply(self.r.get_mode(request.match_info.get("subject"), _flag(request, "defaultToGlobal")))

    async def put_mode(self, request: web.Request) -> web.Response:
        return reply(
            await self.r.set_mode(
                request.match_info.get("subject"), await _body(request), _flag(request, "force")
            )
        )

    async def delete_mode(self, request: web.Request) -> web.Response:
        return reply(await self.r.delete_mode(request.match_info["subject"]))

    async def contexts(self, request: web.Request) -> web.Response:
        return reply(["."])
