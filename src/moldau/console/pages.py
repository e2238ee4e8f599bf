"""The console's pages and actions (aiohttp handlers) and ``create_app``.

Every page is a GET with its state in the query string (linkable); every change is a POST carrying the
CSRF token, refused in read-only mode, and asks for confirmation in the browser first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp import web

from .message_pages import MessagePages
from .page_base import _int, _q
from .schemas import SchemaBrowser
from .security_pages import SecurityPages
from .web import (
    CLUSTER_ERRORS,
    ConsoleSettings,
    Refused,
    json_response,
    make_middlewares,
    paginate,
    redirect,
)

log = logging.getLogger(__name__)

CONFIG_SOURCES = {
    1: "topic",
    2: "broker (dynamic)",
    3: "cluster default (dynamic)",
    4: "broker (static)",
    5: "Kafka default",
    6: "broker logger",
    7: "client metrics",
}


class Console(MessagePages, SecurityPages):
    """The pages and actions and their routes: overview, topics, groups, data flow, schemas and health here;
    messages in ``MessagePages``, transactions and security in ``SecurityPages``, all on ``PageBase``."""

    # ------------------------------------------------------------------------------------------ overview
    async def overview(self, request: web.Request) -> web.Response:
        cluster, snap = await asyncio.gather(self.view.describe_cluster(), self.view.snapshot())
        topics = list(snap.topics.values())
        totals = self.sampler.totals()
        stats = {
            "topics": len(topics),
            "partitions": sum(len(t.partitions) for t in topics),
            "under_replicated": sum(t.under_replicated for t in topics),
            "offline": sum(t.offline for t in topics),
            "records": sum(t.records for t in topics),
            "size": sum(t.size or 0 for t in topics) if snap.sizes_known else None,
        }
        return self.render(
            request,
            "overview.html",
            title="Overview",
            active="overview",
            cluster=cluster,
            stats=stats,
            totals=totals,
        )

    # ------------------------------------------------------------------------------------------ topics
    async def topics(self, request: web.Request) -> web.Response:
        snap = await self.view.snapshot()
        show_internal = request.query.get("internal") == "1"
        page = paginate(
            request,
            snap.topics.values(),
            text=lambda t: t.name,
            page_size=self.settings.page_size,
            keys={
                "name": lambda t: t.name,
                "partitions": lambda t: len(t.partitions),
                "replication": lambda t: t.replication,
                "size": lambda t: t.size,
                "records": lambda t: t.records,
                "retention": lambda t: int(t.retention_ms) if t.retention_ms else None,
                "urp": lambda t: t.under_replicated,
            },
            default_sort="name",
            extra_filter=lambda t: show_internal or not t.internal,
        )
        return self.render(
            request,
            "topics.html",
            title="Topics",
            active="topics",
            page=page,
            show_internal=show_internal,
            sizes_known=snap.sizes_known,
            age=time.monotonic() - snap.taken,
        )

    async def topic_create(self, request: web.Request) -> web.Response:
        f = self.form(request)
        name = str(f.get("name", "")).strip()
        if not name:
            raise Refused("a topic name is needed")
        partitions = _int(f.get("partitions", "1"), "partitions")
        replication = _int(f.get("replication", "-1") or "-1", "replication factor")
        configs: dict[str, str] = {}
        for line in str(f.get("configs", "")).splitlines():
            if line.strip():
                k, sep, v = line.partition("=")
                if not sep or not k.strip():
                    raise Refused(f"config line {line!r}: expected NAME=VALUE")
                configs[k.strip()] = v.strip()
        await self.view.create_topic(name, partitions, replication, configs)
        return redirect(f"/topics/{_q(name)}", f"created topic {name} ({partitions} partitions)")

    async def topic(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        t = await self._topic(name)
        try:
            configs = await self.view.topic_configs(name)
        except CLUSTER_ERRORS as e:
            configs = {}
            log.debug("describe configs of %s: %s", name, e)
        rows = []
        for c in sorted(configs.values(), key=lambda c: c.name):
            # what the topic would have without its own setting: the first synonym below the topic level
            # (a broker setting, else Kafka's default), named when it is another key (log.retention.hours)
            below = next(((n, v, src) for (n, v, src) in c.synonyms if src != 1), None)
            default = None
            if below is not None:
                origin = CONFIG_SOURCES.get(below[2], str(below[2]))
                default = f"{below[1]} ({origin}" + (f": {below[0]})" if below[0] != c.name else ")")
            rows.append(
                {
                    "name": c.name,
                    "value": "(sensitive)" if c.is_sensitive else c.value,
                    "source": CONFIG_SOURCES.get(c.source, str(c.source)),
                    "default": default,
                    "overridden": c.source == 1,
                    "read_only": c.read_only,
                    "doc": c.documentation or "",
                }
            )
        ppage = paginate(
            request,
            t.partitions,
            text=lambda p: str(p.partition),
            page_size=100,
            keys={
                "partition": lambda p: p.partition,
                "leader": lambda p: p.leader,
                "start": lambda p: p.start,
                "end": lambda p: p.end,
                "records": lambda p: p.records,
                "size": lambda p: p.size,
            },
            default_sort="partition",
        )
        chart = {
            "series": ["records/s in", "records/s out", "bytes/s in", "bytes/s out (est.)"],
            "scales": ["records", "records", "bytes", "bytes"],
            "scale_labels": ["records/s", "bytes/s"],
            "url": f"/api/topics/{_q(name)}/throughput",
            "refresh": int(self.settings.sample_interval * 1000),
            "data": self._throughput(name),
        }
        return self.render(
            request,
            "topic.html",
            title=f"Topic {name}",
            active="topics",
            t=t,
            configs=rows,
            ppage=ppage,
            chart=chart,
        )

    def _throughput(self, name: str) -> list[list[Any]]:
        return self.sampler.columns(
            f"topic:{name}:records_in",
            f"topic:{name}:records_out",
            f"topic:{name}:bytes_in",
            f"topic:{name}:bytes_out",
        )

    async def api_throughput(self, request: web.Request) -> web.Response:
        return json_response(self._throughput(request.match_info["name"]))

    async def topic_delete(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await self.view.delete_topic(name)
        return redirect("/topics", f"deleted topic {name}")

    async def topic_partitions(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        total = _int(self.form(request).get("total", ""), "partition count")
        await self.view.add_partitions(name, total)
        return redirect(f"/topics/{_q(name)}", f"topic {name} now has {total} partitions")

    async def topic_config(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        f = self.form(request)
        key = str(f.get("key", "")).strip()
        if not key:
            raise Refused("a config name is needed")
        if f.get("op") == "delete":
            await self.view.alter_topic_config(name, key, None)
            msg = f"{key} reset to its default"
        else:
            value = str(f.get("value", ""))
            await self.view.alter_topic_config(name, key, value)
            msg = f"{key} set to {value}"
        return redirect(f"/topics/{_q(name)}#configs", msg)

    # ------------------------------------------------------------------------------------------ groups
    async def groups(self, request: web.Request) -> web.Response:
        listing = await self.view.list_groups()
        lag = {g.group_id: self.sampler.latest(f"group:{g.group_id}:lag") for g in listing}
        shares = [g.group_id for g in listing if (g.group_type or g.protocol_type) == "share"]
        page = paginate(
            request,
            listing,
            text=lambda g: g.group_id,
            page_size=self.settings.page_size,
            keys={
                "id": lambda g: g.group_id,
                "state": lambda g: g.state or "",
                "type": lambda g: g.group_type or g.protocol_type,
                "lag": lambda g: lag[g.group_id],
            },
            default_sort="id",
        )
        members = await self.view.share_member_counts(
            [g.group_id for g in page.items if g.group_id in set(shares)]
        )
        return self.render(
            request, "groups.html", title="Consumer groups", active="groups", page=page, lag=lag,
            members=members,
        )

    def _lag_chart(self, gid: str, topics: list[str]) -> dict[str, Any]:
        names = [f"group:{gid}:lag"] + [f"group:{gid}:lag:{t}" for t in topics[:8]]
        return {
            "series": ["total lag"] + [f"lag {t}" for t in topics[:8]],
            "names": names,
            "url": f"/api/groups/{_q(gid)}/lag",
            "refresh": int(self.settings.sample_interval * 1000),
            "data": self.sampler.columns(*names),
        }

    async def group(self, request: web.Request) -> web.Response:
        return await self._group_page(request, request.match_info["gid"], None, {})

    async def _group_page(
        self, request: web.Request, gid: str, reset: Any, reset_form: dict[str, str]
    ) -> web.Response:
        """A group's page; with ``reset`` (the plan of a reset and its form values), its preview too."""
        self.sampler.viewed(gid)
        if reset is None and await self.view.group_type(gid) == "share":
            return await self._share_group_page(request, gid)
        try:
            g = await self.view.group(gid)
        except CLUSTER_ERRORS as e:
            raise Refused(f"group {gid!r}: {e}", 404) from None
        ppage = paginate(
            request,
            g.rows,
            text=lambda r: f"{r.topic} {r.partition} {r.member or ''}",
            page_size=200,
            keys={
                "topic": lambda r: (r.topic, r.partition),
                "lag": lambda r: r.lag,
                "member": lambda r: r.member or "",
            },
            default_sort="topic",
        )
        return self.render(
            request,
            "group.html",
            title=f"Group {gid}",
            active="groups",
            g=g,
            gid=gid,
            ppage=ppage,
            chart=self._lag_chart(gid, g.topics),
            reset=reset,
            reset_form=reset_form,
        )

    async def _share_group_page(self, request: web.Request, gid: str) -> web.Response:
        """A share group's page: members and assignments, per share-partition SPSO, end, lag."""
        try:
            g = await self.view.share_group(gid)
        except CLUSTER_ERRORS as e:
            raise Refused(f"share group {gid!r}: {e}", 404) from None
        return self.render(
            request,
            "share_group.html",
            title=f"Share group {gid}",
            active="groups",
            g=g,
            gid=gid,
            chart=self._lag_chart(gid, g.topics),
        )

    async def api_lag(self, request: web.Request) -> web.Response:
        gid = request.match_info["gid"]
        self.sampler.viewed(gid)
        prefix = f"group:{gid}:lag:"
        topics = sorted(n[len(prefix) :] for n in self.sampler.series if n.startswith(prefix))
        return json_response(self._lag_chart(gid, topics)["data"])

    async def _refuse_share(self, gid: str) -> None:
        if await self.view.group_type(gid) == "share":
            raise Refused(f"{gid} is a share group: its start offsets are reset with "
                          f"`moldau share-groups reset-offsets` (the group must have no members)")

    def _reset_args(self, src: Any) -> tuple[str | None, str, str]:
        topic = str(src.get("topic", "")).strip() or None
        strategy = str(src.get("strategy", "earliest"))
        value = str(src.get("value", "")).strip()
        return topic, strategy, value

    async def reset_preview(self, request: web.Request) -> web.Response:
        gid = request.match_info["gid"]
        await self._refuse_share(gid)
        topic, strategy, value = self._reset_args(request.query)
        try:
            plan = await self.view.reset_plan(gid, topic, strategy, value)
        except ValueError as e:
            raise Refused(str(e)) from None
        return await self._group_page(
            request, gid, plan, {"topic": topic or "", "strategy": strategy, "value": value}
        )

    async def reset_execute(self, request: web.Request) -> web.Response:
        gid = request.match_info["gid"]
        await self._refuse_share(gid)
        topic, strategy, value = self._reset_args(self.form(request))
        try:
            plan = await self.view.reset_plan(gid, topic, strategy, value)
        except ValueError as e:
            raise Refused(str(e)) from None
        await self.view.apply_reset(gid, plan)
        return redirect(f"/groups/{_q(gid)}", f"reset {len(plan)} offsets of group {gid} ({strategy})")

    async def group_delete(self, request: web.Request) -> web.Response:
        gid = request.match_info["gid"]
        await self.view.delete_group(gid)
        return redirect("/groups", f"deleted group {gid}")

    # ------------------------------------------------------------------------------------------ data flow
    async def flow(self, request: web.Request) -> web.Response:
        from .flow import build_flow

        graph = await build_flow(self.view, self.sampler)
        return self.render(request, "flow.html", title="Data flow", active="flow", graph=graph)
    # ------------------------------------------------------------------------------------------ schemas
    def _browser(self) -> SchemaBrowser:
        if self.schemas is None:
            raise web.HTTPNotFound(text="no schema registry configured (moldau console --schema-registry)")
        return self.schemas

    async def schema_subjects(self, request: web.Request) -> web.Response:
        b = self._browser()
        error, subjects = None, []
        try:
            subjects = await asyncio.to_thread(b.subjects)
        except Exception as e:  # noqa: BLE001 - the registry down or refusing: said on the page
            error = f"schema registry {b.url}: {e}"
        return self.render(request, "schemas.html", title="Schemas", active="schemas", subjects=subjects,
                           error=error, registry=b.url)

    async def schema_subject(self, request: web.Request) -> web.Response:
        b = self._browser()
        subject = request.match_info["subject"]
        qs = request.query
        a = _int(qs["a"], "a") if qs.get("a") else None
        v = _int(qs["b"], "b") if qs.get("b") else None
        try:
            info = await asyncio.to_thread(b.subject, subject, a, v)
        except Exception as e:  # noqa: BLE001
            return await self.render_error(request, f"subject {subject!r}: {e}", status=404)
        return self.render(request, "schema.html", title=f"Subject {subject}", active="schemas", s=info)

    # ------------------------------------------------------------------------------------------ app
    async def health(self, request: web.Request) -> web.Response:
        return json_response(
            {"status": "ok", "sampling_rounds": self.sampler.rounds, "sampler_error": self.sampler.last_error}
        )

    def app(self) -> web.Application:
        app = web.Application(
            middlewares=make_middlewares(self.settings, self._error_page), client_max_size=4 * 1024 * 1024
        )
        r = app.router
        r.add_get("/", self.overview)
        r.add_get("/health", self.health)
        r.add_get("/topics", self.topics)
        r.add_post("/topics", self._action(self.topic_create))
        r.add_get("/topics/{name}", self.topic)
        r.add_post("/topics/{name}/delete", self._action(self.topic_delete))
        r.add_post("/topics/{name}/partitions", self._action(self.topic_partitions))
        r.add_post("/topics/{name}/configs", self._action(self.topic_config))
        r.add_get("/topics/{name}/messages", self.messages)
        r.add_get("/topics/{name}/messages.jsonl", self.messages_jsonl)
        r.add_get("/topics/{name}/tail", self.tail)
        r.add_post("/topics/{name}/produce", self._action(self.produce))
        r.add_get("/api/topics/{name}/throughput", self.api_throughput)
        r.add_get("/groups", self.groups)
        r.add_get("/groups/{gid}", self.group)
        r.add_get("/groups/{gid}/reset", self.reset_preview)
        r.add_post("/groups/{gid}/reset", self._action(self.reset_execute))
        r.add_post("/groups/{gid}/delete", self._action(self.group_delete))
        r.add_get("/api/groups/{gid}/lag", self.api_lag)
        r.add_get("/transactions", self.transactions)
        r.add_get("/security", self.security)
        r.add_post("/security/acls", self._action(self.acl_create))
        r.add_post("/security/acls/delete", self._action(self.acl_delete))
        r.add_post("/security/users", self._action(self.user_upsert))
        r.add_post("/security/users/delete", self._action(self.user_delete))
        r.add_get("/flow", self.flow)
        r.add_get("/schemas", self.schema_subjects)
        r.add_get("/schemas/{subject}", self.schema_subject)
        from importlib.resources import files

        r.add_static("/static", str(files("moldau.console") / "static"), append_version=False)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _error_page(self, request: web.Request, message: str, status: int) -> web.Response:
        return await self.render_error(request, message, status)

    def _action(self, fn: Any) -> Any:
        """A change: Kafka errors and bad values become an error page naming the cause."""

        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                return await fn(request)
            except CLUSTER_ERRORS as e:
                raise Refused(f"the broker refused: {e}") from None
            except ValueError as e:
                raise Refused(str(e)) from None

        return handler

    async def _on_startup(self, app: web.Application) -> None:
        await self.view.start()
        self.sampler.start()

    async def _on_cleanup(self, app: web.Application) -> None:
        await self.sampler.stop()
        await self.view.close()


def create_app(settings: ConsoleSettings) -> web.Application:
    return Console(settings).app()
