#!/usr/bin/env python3
"""Generate moldau's message declarations (src/moldau/protocol/messages/*.py) from Kafka's JSON definitions.

Inputs (facts only: names, types, version ranges):
  * the newest definitions, as kafka-python ships them (kafka/protocol/schemas/resources/*.json);
  * MIN_OVERRIDES below: the messages whose minimum version Kafka 4 raised (KIP-896).  moldau declares those
    old versions too.  Kafka kept the field version ranges of the removed versions in its definitions (checked
    against the Kafka 3.9 definitions: no field of a removed version was dropped), so the same field list
    describes them;
  * tools/kafka_json/4.1/*.json: messages kafka-python does not ship (ConsumerGroupHeartbeat, ...);
  * tools/kafka_json/3.9/*.json: the ZooKeeper-mode inter-broker APIs Kafka 4 removed (LeaderAndIsr, ...).

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
EXTRA_DIRS = [ROOT / "tools" / "kafka_json" / "4.1", ROOT / "tools" / "kafka_json" / "3.9"]
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
    "controller": ["LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown"],
    "txn": ["InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
            "TxnOffsetCommit", "DescribeProducers", "DescribeTransactions", "ListTransactions"],
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
                origin = "kafka-python's JSON" if path.parent == kp else f"apache/kafka {path.parent.name} JSON"
                body.append("")
                body.append(f"# {name} (valid {j['validVersions']} in {origin})")
                if path.parent != kp:
                    header_notes.append(f"  {name}: not shipped by kafka-python; from {path.relative_to(ROOT)}")
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
        out = OUT / f"{module}.py"
        if not out.exists() or out.read_text() != content:
            changed += 1
            if not check:
                out.write_text(content)
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
    for module, names in FAMILIES.items():
        mine = [n for (mod, n) in exported if mod == module]
        init.append(f"from .{module} import (  # noqa: F401")
        init.extend(f"    {n}," for n in mine)
        init.append(")")
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
    content = "\n".join(init) + "\n"
    out = OUT / "__init__.py"
    if not out.exists() or out.read_text() != content:
        changed += 1
        if not check:
            out.write_text(content)
    return changed


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
