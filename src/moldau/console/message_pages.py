"""The console's message pages: browse (HTML and JSON Lines), live tail (server-sent events), produce."""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.parse
from typing import Any

from aiohttp import web

from .cluster import parse_time_ms
from .page_base import PageBase, _int, _q, _safe_file
from .records import (
    MODES,
    BrowseRequest,
    FilterError,
    RecordFilter,
    browse,
    decode,
    parse_bytes,
    record_json,
    tail,
)
from .web import (
    Refused,
    fmt_ts,
    redirect,
)

log = logging.getLogger(__name__)


class MessagePages(PageBase):
    """``/topics/NAME/messages``, ``messages.jsonl``, ``tail`` and ``produce``."""

    def _browse_request(self, request: web.Request, t: Any) -> tuple[BrowseRequest, dict[str, Any]]:
        qs = request.query
        part = qs.get("partition", "")
        partitions = None
        if part not in ("", "all"):
            p = _int(part, "partition")
            if p not in {x.partition for x in t.partitions}:
                raise Refused(f"topic {t.name} has no partition {p}")
            partitions = [p]
        mode = qs.get("mode", "newest")
        if mode not in MODES:
            raise Refused(f"unknown seek mode {mode!r} (one of {', '.join(MODES)})")
        decoding = qs.get("decode", "text")
        if decoding not in self.decodings:
            raise Refused(f"unknown decoding {decoding!r} (one of {', '.join(self.decodings)})")
        key_decoding = qs.get("kdecode", "text")
        if key_decoding not in self.decodings:
            raise Refused(f"unknown key decoding {key_decoding!r}")
        limit = min(max(_int(qs.get("limit", "50") or "50", "limit"), 1), 1000)
        offset = _int(qs.get("offset", "0") or "0", "offset") if mode == "offset" else 0
        ts = 0
        if mode == "timestamp":
            try:
                ts = parse_time_ms(qs.get("ts", ""))
            except ValueError as e:
                raise Refused(str(e)) from None
        try:
            flt = RecordFilter(
                qs.get("key", ""), qs.get("value", ""), qs.get("header", ""), qs.get("expr", "")
            )
        except FilterError as e:
            raise Refused(str(e)) from None
        form = {
            "partition": part or "all",
            "mode": mode,
            "offset": qs.get("offset", ""),
            "ts": qs.get("ts", ""),
            "limit": limit,
            "key": flt.key,
            "value": flt.value,
            "header": flt.header,
            "expr": flt.expression,
            "decode": decoding,
            "kdecode": key_decoding,
        }
        return BrowseRequest(t.name, partitions, mode, offset, ts, limit, flt), form

    async def messages(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        t = await self._topic(name)
        req, form = self._browse_request(request, t)
        result = await browse(self.view.consumer_conf(), [p.partition for p in t.partitions], req)
        dec = await self._decoders(form, result.records)
        rows = [
            {
                "partition": r.partition,
                "offset": r.offset,
                "timestamp": fmt_ts(r.timestamp),
                "ts_type": "log append" if r.timestamp_type == 1 else "create",
                "key": dec["kdecode"](r.key),
                "value": dec["decode"](r.value),
                "headers": [(k, decode(v, "text")) for k, v in r.headers or []],
            }
            for r in result.records
        ]
        query = urllib.parse.urlencode({k: v for k, v in request.query.items()})
        tail_query = urllib.parse.urlencode(
            {k: v for k, v in request.query.items() if k in ("partition", "key", "value", "header", "expr")}
        )
        return self.render(
            request,
            "messages.html",
            title=f"Messages of {name}",
            active="topics",
            t=t,
            form=form,
            rows=rows,
            result=result,
            modes=MODES,
            decodings=self.decodings,
            download=f"/topics/{_q(name)}/messages.jsonl" + (f"?{query}" if query else ""),
            tail_url=f"/topics/{_q(name)}/tail" + (f"?{tail_query}" if tail_query else ""),
        )

    async def messages_jsonl(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        t = await self._topic(name)
        req, _form = self._browse_request(request, t)
        result = await browse(self.view.consumer_conf(), [p.partition for p in t.partitions], req)
        body = "".join(json.dumps(record_json(r), ensure_ascii=False) + "\n" for r in result.records)
        return web.Response(
            text=body,
            content_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{_safe_file(name)}.jsonl"'},
        )

    async def tail(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        t = await self._topic(name)
        qs = request.query
        parts = [p.partition for p in t.partitions]
        if qs.get("partition", "all") not in ("", "all"):
            p = _int(qs["partition"], "partition")
            parts = [p] if p in parts else []
        try:
            flt = RecordFilter(
                qs.get("key", ""), qs.get("value", ""), qs.get("header", ""), qs.get("expr", "")
            )
        except FilterError as e:
            raise Refused(str(e)) from None
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await resp.prepare(request)
        # the consumer is closed as soon as the browser goes away (a write fails) or the console stops
        async with contextlib.aclosing(tail(self.view.consumer_conf(), name, parts, flt)) as batches:
            try:
                async for batch in batches:
                    if batch is None:
                        await resp.write(b"event: ready\ndata: {}\n\n")
                    elif batch:
                        data = json.dumps([dict(record_json(r), time=fmt_ts(r.timestamp)) for r in batch])
                        await resp.write(f"event: records\ndata: {data}\n\n".encode())
                    else:
                        await resp.write(b": idle\n\n")
            except ConnectionResetError:
                log.debug("live tail of %s: the browser went away", name)
        return resp

    async def produce(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        f = self.form(request)
        enc = str(f.get("encoding", "text"))
        if enc not in ("text", "hex", "base64"):
            raise Refused(f"unknown encoding {enc!r}")
        try:
            value = parse_bytes(str(f.get("value", "")), enc) if not f.get("null_value") else None
            key_text = str(f.get("key", ""))
            key = parse_bytes(key_text, enc) if key_text else None
        except ValueError as e:
            raise Refused(f"produce: {e}") from None
        headers: list[tuple[str, bytes | None]] = []
        for line in str(f.get("headers", "")).splitlines():
            if line.strip():
                hk, sep, hv = line.partition("=")
                headers.append((hk.strip(), hv.encode("utf-8") if sep else None))
        part_text = str(f.get("partition", "")).strip()
        partition = _int(part_text, "partition") if part_text not in ("", "auto") else None
        md = await self.view.produce(name, value, key, headers, partition)
        target = f"/topics/{_q(name)}/messages?partition={md.partition}&mode=offset&offset={md.offset}"
        return redirect(target, f"produced to partition {md.partition} at offset {md.offset}")
