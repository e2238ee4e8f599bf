#!/usr/bin/env python3
"""Generate moldau's message declarations (src/moldau/protocol/messages/*.py) from Kafka's JSON definitions.

Inputs (facts only: names, types, version ranges):
  * the newest definitions, as kafka-python ships them (kafka/protocol/schemas/resources/*.json);
  * MIN_OVERRIDES below: the messages whose minimum version Kafka 4 raised (KIP-896).  moldau declares those
    old versions too.  Kafka kept the field version ranges of the removed versions in its definitions (checked
    against the Kafka 3.9 definitions: no field of a removed version was dropped), so the same field list
    describes them;
  * tools/kafka_json/4.1/*.json: messages kafka-python does not ship (ConsumerGroupHeartbeat, ...);
  * tools/kafka_json/4.2/*.json: the share-group APIs of KIP-932 at Kafka 4.2's versions;
  * tools/kafka_json/3.9/*.json: the ZooKeeper-mode inter-broker APIs Kafka 4 removed (LeaderAndIsr, ...).

Outputs: the declarations (messages/<family>.py, messages/__init__.py) and, next to them, type stubs
(messages/<family>.pyi, messages/__init__.pyi; their base classes are in the hand-written
messages/_types.pyi): one class per message with its fields and their Python types, the message's structs
nested in it, and the declaration's API (``new``, ``decode``, ``encode``, versions) as class members.  At
run time a message's name is its ``Message`` declaration, which behaves like that class: calling it builds an
instance, ``isinstance(obj, ProduceRequest)`` works, and ``ProduceRequest.TopicProduceData`` is the struct's
class.  So handlers are typed
``async def produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse``.

Usage: python tools/gen_messages.py [--check]
The output is committed; rerun after changing an input or this generator.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "moldau" / "protocol" / "messages"
EXTRA_DIRS = [
    ROOT / "tools" / "kafka_json" / "4.2",
    ROOT / "tools" / "kafka_json" / "4.1",
    ROOT / "tools" / "kafka_json" / "3.9",
]
MAXV = 0x7FFF


def kafka_python_dir() -> Path:
    import kafka.protocol.schemas.resources as r  # test-only dependency, used at generation time

    return Path(r.__file__).parent


# API family -> module, in ApiKey order within a module.
FAMILIES: dict[str, list[str]] = {
    "headers": ["RequestHeader", "ResponseHeader"],
    "produce": ["Produce"],
    "fetch": ["Fetch"],
    "metadata": ["Metadata", "DescribeCluster", "DescribeTopicPartitions"],
    "offsets": ["ListOffsets", "OffsetCommit", "OffsetFetch", "DeleteRecords", "OffsetForLeaderEpoch",
                "OffsetDelete"],
    "groups": ["FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups",
               "ListGroups", "DeleteGroups", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
               "ConsumerProtocolSubscription", "ConsumerProtocolAssignment"],
    "sasl": ["SaslHandshake", "SaslAuthenticate"],
    "api_versions": ["ApiVersions"],
    "topics": ["CreateTopics", "DeleteTopics", "CreatePartitions", "ElectLeaders",
               "AlterPartitionReassignments", "ListPartitionReassignments"],
    "configs": ["DescribeConfigs", "AlterConfigs", "IncrementalAlterConfigs", "ListConfigResources"],
    "acls": ["DescribeAcls", "CreateAcls", "DeleteAcls"],
    "log_dirs": ["AlterReplicaLogDirs", "DescribeLogDirs"],
    "quotas": ["DescribeClientQuotas", "AlterClientQuotas", "DescribeUserScramCredentials",
               "AlterUserScramCredentials"],
    "cluster": ["DescribeQuorum", "UpdateFeatures"],
    "controller": ["LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown", "AlterPartition"],
    "txn": ["InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
            "TxnOffsetCommit", "DescribeProducers", "DescribeTransactions", "ListTransactions"],
    "share": ["ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
              "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
              "DeleteShareGroupState", "ReadShareGroupStateSummary", "DescribeShareGroupOffsets",
              "AlterShareGroupOffsets", "DeleteShareGroupOffsets"],
}

# Versions the generated declaration starts from, where it is lower than the JSON's minimum (KIP-896).
MIN_OVERRIDES: dict[str, int] = {
    "RequestHeader": 0,  # header v0 (no client id) is still used by ControlledShutdown v0
    "Produce": 0, "Fetch": 0, "ListOffsets": 0, "Metadata": 0, "OffsetCommit": 0, "OffsetFetch": 0,
    "JoinGroup": 0, "CreateTopics": 0, "DeleteTopics": 0, "OffsetForLeaderEpoch": 0, "DescribeConfigs": 0,
    "DescribeLogDirs": 0, "AlterReplicaLogDirs": 0, "CreateAcls": 0, "DeleteAcls": 0, "DescribeAcls": 0,
    "WriteTxnMarkers": 0,
}

# Hand-written quirks emitted right after a message's declaration (code, comment).
QUIRKS: dict[str, list[str]] = {
    "RequestHeader": [
        "# moldau's names for the header fields (architecture contract): header.api_key, header.api_version.",
        "RequestHeader.add_aliases(api_key='request_api_key', api_version='request_api_version')",
    ],
    "ApiVersionsResponse": [
        "# Quirk: the ApiVersions response header is always v0 (no tagged fields), also for the flexible",
        "# versions, so that a client can parse it before it knows what the broker supports (KIP-511).",
        "# An UNSUPPORTED_VERSION error is answered with a v0 body (see the broker's router).",
        "ApiVersionsResponse.fixed_header_version = 0",
    ],
}


def strip_comments(text: str) -> str:
    """Remove // comments outside JSON strings."""
    out = []
    i = 0
    n = len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def load(path: Path) -> dict[str, Any]:
    return json.loads(strip_comments(path.read_text()))


# --- version sets ----------------------------------------------------------------------------------------

def vset(spec: str | None, hi: int) -> set[int]:
    if spec is None:
        return set()
    spec = spec.strip()
    if spec in ("none", ""):
        return set()
    if spec.endswith("+"):
        return set(range(int(spec[:-1]), hi + 1))
    if "-" in spec:
        a, b = spec.split("-")
        return set(range(int(a), min(int(b), hi) + 1))
    return {int(spec)} if int(spec) <= hi else set()


def vspec(vs: set[int], hi: int, open_end: bool) -> str:
    """Render a contiguous version set; open-ended ('N+') when it reaches hi and the source was open."""
    if not vs:
        return "none"
    lo, top = min(vs), max(vs)
    if len(vs) != top - lo + 1:
        raise ValueError(f"non-contiguous versions {sorted(vs)}")
    if top == hi and open_end:
        return f"{lo}+"
    if lo == top:
        return str(lo)
    return f"{lo}-{top}"


# --- definitions -----------------------------------------------------------------------------------------

def resolve_common(fields: list[dict[str, Any]], common: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Inline commonStructs references."""
    out = []
    for f in fields:
        f = dict(f)
        t = f["type"]
        elem = t[2:] if t.startswith("[]") else t
        if elem[:1].isupper():
            if "fields" not in f:
                f["fields"] = common[elem]["fields"]
            f["fields"] = resolve_common(f["fields"], common)
        out.append(f)
    return out


# --- emitting --------------------------------------------------------------------------------------------

def py_default(f: dict[str, Any]) -> str | None:
    if "default" not in f:
        return None
    d = f["default"]
    t = f["type"]
    if d == "null":
        return "None"
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return repr(int(str(d), 0))
    if t == "float64":
        return repr(float(d))
    if t == "bool":
        if isinstance(d, bool):
            return repr(d)
        return repr(str(d).lower() == "true")
    if t == "string":
        return repr(str(d))
    return repr(d)


def emit_fields(fields: list[dict[str, Any]], indent: int, lines: list[str]) -> None:
    pad = "    " * indent
    for f in fields:
        args = [repr(f["name"]), repr(f["type"]), repr(f["versions"])]
        if f.get("nullableVersions"):
            args.append(f"nullable={f['nullableVersions']!r}")
        d = py_default(f)
        if d is not None:
            args.append(f"default={d}")
        if "tag" in f:
            args.append(f"tag={f['tag']}")
            args.append(f"tagged={f['taggedVersions']!r}")
        if "flexibleVersions" in f:
            args.append(f"flexible={f['flexibleVersions']!r}")
        if f.get("fields"):
            lines.append(f"{pad}F({', '.join(args)}, fields=[")
            emit_fields(f["fields"], indent + 1, lines)
            lines.append(f"{pad}]),")
        else:
            lines.append(f"{pad}F({', '.join(args)}),")


def build_message(j: dict[str, Any], base: str) -> tuple[list[str], list[str]]:
    notes: list[str] = []
    common = {c["name"]: c for c in j.get("commonStructs", [])}
    fields = resolve_common(j.get("fields", []), common)
    valid = j["validVersions"]
    lo = int(valid.split("-")[0]) if "-" in valid else int(valid)
    hi = int(valid.split("-")[1]) if "-" in valid else int(valid)
    new_lo = MIN_OVERRIDES.get(base, lo)
    if new_lo < lo:
        # Kafka 4 raised validVersions but kept every field's version range, so the removed versions are
        # fully described by the same field list (checked field by field against the Kafka 3.9 definitions;
        # the byte-exact tests hold them against kafka-python's independent old protocol classes).
        added = f"version {new_lo}" if new_lo == lo - 1 else f"versions {new_lo}-{lo - 1}"
        notes.append(f"{added} added (removed by Kafka 4, KIP-896; layout from the field "
                     f"ranges the definition keeps, as in Kafka 3.9)")
    kind = j["type"]
    vspec_ = f"{new_lo}-{hi}" if new_lo != hi else str(hi)
    args = [repr(j["name"]), repr(j.get("apiKey")), repr(kind), repr(vspec_)]
    fl = j.get("flexibleVersions", "none")
    if fl != "none":
        args.append(f"flexible={fl!r}")
    lines = [f"{j['name']} = Message({', '.join(args)}, fields=["]
    emit_fields(fields, 1, lines)
    lines.append("])")
    if j.get("latestVersionUnstable"):
        notes.append("latestVersionUnstable in the JSON definition")
    return lines, notes


# --- type stubs ------------------------------------------------------------------------------------------

# Instance attributes the runtime adds with Message.add_aliases (see QUIRKS), for the stubs.
STUB_ALIASES: dict[str, dict[str, str]] = {
    "RequestHeader": {"api_key": "request_api_key", "api_version": "request_api_version"},
}

_PY_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint16": "int",
    "uint32": "int",
    "float64": "float",
    "bool": "bool",
    "string": "str",
    "bytes": "bytes",
    "uuid": "UUID",
    "records": "Records",
}

def _stub_type(f: Any, qual: str) -> str:
    """The Python type of a declared field (``f`` a moldau.protocol.schema.Field), for the stubs."""
    elem = f"{qual}.{f.struct_name}" if f.struct_name is not None else _PY_TYPES[f.elem]
    t = f"list[{elem}]" if f.is_array else elem
    if t == "Records":
        return t
    if f.nullable is not None or f.default is None:
        t += " | None"
    return t


def _stub_struct(msg: Any, sname: str, base: str, indent: int, lines: list[str]) -> None:
    pad = "    " * indent
    qual = msg.name
    fields = msg._class_fields[sname]
    lines.append(f"{pad}class {sname}({base}):")
    body = pad + "    "
    for attr, f in fields.items():
        lines.append(f"{body}{attr}: {_stub_type(f, qual)}")
    params = "".join(f", {attr}: {_stub_type(f, qual)} = ..." for attr, f in fields.items())
    params += ", _unknown_tags: dict[int, bytes] | None = None"
    lines.append(f"{body}def __init__(self, *{params}) -> None: ...")
    if sname == msg.name:
        lines.append("    @classmethod")
        lines.append(f"    def new(cls, *{params}) -> {qual}: ...")
        for alias, attr in STUB_ALIASES.get(msg.name, {}).items():
            t = _stub_type(fields[attr], qual)
            lines.append("    @property")
            lines.append(f"    def {alias}(self) -> {t}: ...")
            lines.append(f"    @{alias}.setter")
            lines.append(f"    def {alias}(self, value: {t}) -> None: ...")
        for child in msg._class_fields:
            if child != msg.name:
                _stub_struct(msg, child, "Struct", indent + 1, lines)


def stub_module(module: str, messages: list[Any]) -> str:
    """The .pyi text of one messages module."""
    uses_uuid = any(
        f.elem == "uuid" for msg in messages for fs in msg._class_fields.values() for f in fs.values()
    )
    lines = [f'"""Types of the Kafka message declarations in {module}.py (one class per message, its structs',
             "nested).", "", "Generated by tools/gen_messages.py; do not edit by hand.", '"""', ""]
    if uses_uuid:
        lines += ["from uuid import UUID", ""]
    body: list[str] = []
    # responses first: a request's base class names its response, and mypy resolves the nested struct
    # classes of a class whose base is a forward reference only later
    for msg in sorted(messages, key=lambda msg: msg.kind == "request"):
        body.append("")
        if msg.api_key is None:
            base = "DataMessage"
        elif msg.kind == "request":  # typed by its response: Connection.send(request) -> the response
            base = f"ApiRequest[{msg.name[:-len('Request')]}Response]"
        else:
            base = "ApiMessage"
        _stub_struct(msg, msg.name, base, 0, body)
    used = [n for n in ("ApiMessage", "ApiRequest", "DataMessage", "Records", "Struct")
            if any(f"({n})" in ln or f"({n}[" in ln or f": {n}" in ln or f"[{n}" in ln or f" {n} |" in ln for ln in body)]
    lines += [f"from ._types import {', '.join(used)}", ""]
    return "\n".join(lines + body) + "\n"


def generate(check: bool = False) -> int:
    kp = kafka_python_dir()
    sources: dict[str, Path] = {p.stem: p for p in sorted(kp.glob("*.json"))}
    for extra in EXTRA_DIRS:
        for p in sorted(extra.glob("*.json")):
            sources.setdefault(p.stem, p)
    placed = {n for names in FAMILIES.values() for n in names}
    bases = {s[:-7] if s.endswith("Request") else s[:-8] if s.endswith("Response") else s for s in sources}
    missing = bases - placed
    if missing:
        raise SystemExit(f"messages without a family: {sorted(missing)}")
    changed = 0
    exported: list[tuple[str, str]] = []
    for module, names in FAMILIES.items():
        body: list[str] = []
        header_notes: list[str] = []
        for base in names:
            cands = [base] if base in sources else [base + "Request", base + "Response"]
            for name in cands:
                if name not in sources:
                    print(f"warning: no JSON definition for {name}, skipped", file=sys.stderr)
                    continue
                path = sources[name]
                j = load(path)
                lines, notes = build_message(j, base)
                origin = (
                    "kafka-python's JSON" if path.parent == kp else f"apache/kafka {path.parent.name} JSON"
                )
                body.append("")
                body.append(f"# {name} (valid {j['validVersions']} in {origin})")
                if path.parent != kp:
                    header_notes.append(
                        f"  {name}: not shipped by kafka-python; from {path.relative_to(ROOT)}"
                    )
                body.extend(lines)
                if name in QUIRKS:
                    body.extend(QUIRKS[name])
                for n in notes:
                    header_notes.append(f"  {name}: {n}")
                exported.append((module, name))
        text = [
            f'"""Kafka message declarations: {module}.',
            "",
            "Generated by tools/gen_messages.py from Kafka's JSON message definitions; do not edit by hand.",
            '"""',
            "",
            "# Differences from kafka-python's JSON definitions:",
        ]
        text.extend(f"#{n}" for n in header_notes) if header_notes else text.append("#  none")
        text += ["", "from moldau.protocol.schema import F, Message", ""]
        text += body
        content = "\n".join(text) + "\n"
        changed += _write(OUT / f"{module}.py", content, check)
        ns: dict[str, Any] = {}
        exec(compile(content, f"{module}.py", "exec"), ns)  # noqa: S102 - the declarations just generated
        declared = [ns[n] for (mod, n) in exported if mod == module]
        changed += _write(OUT / f"{module}.pyi", stub_module(module, declared), check)
    # __init__ exporting everything
    init = [
        '"""All declared Kafka messages.',
        "",
        "Generated by tools/gen_messages.py; do not edit by hand.",
        "",
        "    from moldau.protocol import messages as m",
        "    m.REQUESTS[api_key], m.RESPONSES[api_key], m.ProduceRequest, m.RequestHeader, ...",
        '"""',
        "",
        "from moldau.protocol.schema import Message",
        "",
    ]
    init += _family_imports(exported, "  # noqa: F401", "    {n},")
    init += [
        "",
        "ALL: dict[str, Message] = {m.name: m for m in (",
    ]
    init.extend(f"    {n}," for (_, n) in exported)
    init += [
        ")}",
        "REQUESTS: dict[int, Message] = {m.api_key: m for m in ALL.values() if m.kind == 'request'"
        " and m.api_key is not None}",
        "RESPONSES: dict[int, Message] = {m.api_key: m for m in ALL.values() if m.kind == 'response'"
        " and m.api_key is not None}",
        "",
        "__all__ = ['ALL', 'REQUESTS', 'RESPONSES', *ALL]",
    ]
    changed += _write(OUT / "__init__.py", "\n".join(init) + "\n", check)
    # its stub: the same names, typed (the classes of the family stubs; the tables hold declarations)
    stub = [
        '"""Types of moldau.protocol.messages.',
        "",
        "Generated by tools/gen_messages.py; do not edit by hand.",
        '"""',
        "",
        "from moldau.protocol.schema import Message",
        "",
    ]
    stub += _family_imports(exported, "", "    {n} as {n},")  # 'as': re-exported
    stub += [
        "",
        "ALL: dict[str, Message]",
        "REQUESTS: dict[int, Message]",
        "RESPONSES: dict[int, Message]",
    ]
    changed += _write(OUT / "__init__.pyi", "\n".join(stub) + "\n", check)
    return changed


def _family_imports(exported: list[tuple[str, str]], comment: str, line: str) -> list[str]:
    """One ``from .<family> import (...)`` block per family, a ``line`` (formatted with ``n``) per message."""
    out: list[str] = []
    for module in FAMILIES:
        out.append(f"from .{module} import ({comment}")
        out.extend(line.format(n=n) for (mod, n) in exported if mod == module)
        out.append(")")
    return out


def _write(out: Path, content: str, check: bool) -> int:
    """Write ``out`` unless it holds ``content`` already (only compare with ``check``); 1 if it differs."""
    if out.exists() and out.read_text() == content:
        return 0
    if not check:
        out.write_text(content)
    return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed output is stale")
    a = ap.parse_args(argv)
    changed = generate(check=a.check)
    if a.check and changed:
        print(f"{changed} generated file(s) out of date", file=sys.stderr)
        return 1
    print(f"{changed} file(s) {'would change' if a.check else 'written'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
