"""``moldau schemas``: a client of a schema registry with Confluent's REST API (moldau's or Confluent's):
list, show, register, check, delete, config, mode."""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from .common import (
    CliError,
    UsageError,
    add_command,
    add_json_arg,
    add_subcommands,
    print_json,
    print_table,
    run_command,
)

ENV_URL = "MOLDAU_SCHEMA_REGISTRY_URL"
DEFAULT_URL = "http://127.0.0.1:8081"
CT = "application/vnd.schemaregistry.v1+json"


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "schemas",
        help="schema registry client: list, show, register, check, delete, config, mode",
        description="Talk to a schema registry with Confluent's REST API (moldau registry, the broker's "
        "schema.registry.listener, or Confluent's).",
        examples="  moldau schemas list\n"
        "  moldau schemas register orders-value order.avsc\n"
        "  moldau schemas register orders-value order.proto --type PROTOBUF --reference money.proto=money:1\n"
        "  moldau schemas check orders-value order-v2.avsc\n"
        "  moldau schemas config orders-value --set FULL\n",
    )
    p.add_argument(
        "--registry",
        "-r",
        metavar="URL",
        default=None,
        help=f"the registry's URL (default ${ENV_URL} or {DEFAULT_URL})",
    )
    p.add_argument(
        "--user",
        metavar="USER:PASSWORD",
        default=None,
        help="HTTP basic auth (default $MOLDAU_SCHEMA_REGISTRY_USER)",
    )
    p.add_argument("--ca", metavar="PEM", default=None, help="CA file to verify an HTTPS registry with")
    subs = add_subcommands(p, "schemas_command")

    s = subs.add_parser("list", help="subjects and their latest versions")
    s.add_argument("--prefix", default="", help="only subjects starting with this")
    s.add_argument("--deleted", action="store_true", help="soft-deleted subjects too")
    add_json_arg(s)
    s.set_defaults(func=run_command(cmd_list))

    s = subs.add_parser("show", help="a subject's version (latest by default) or a schema by id")
    s.add_argument("subject", nargs="?", help="the subject (or --id)")
    s.add_argument("--version", default="latest", help="version number or latest (default)")
    s.add_argument("--id", type=int, default=None, help="a schema id instead of a subject")
    s.add_argument("--versions", action="store_true", help="list the subject's versions")
    s.set_defaults(func=run_command(cmd_show))

    for name, helptext, fn in (
        ("register", "register a schema file under a subject", cmd_register),
        ("check", "is a schema file compatible with a subject? (exit 1 if not)", cmd_check),
    ):
        s = subs.add_parser(name, help=helptext)
        s.add_argument("subject")
        s.add_argument("file", help="the schema file (- for stdin)")
        s.add_argument(
            "--type",
            default=None,
            choices=("AVRO", "JSON", "PROTOBUF"),
            help="schema type (default: from the file name: .avsc AVRO, .json JSON, .proto PROTOBUF)",
        )
        s.add_argument(
            "--reference",
            action="append",
            default=[],
            metavar="NAME=SUBJECT:VERSION",
            help="a reference (repeatable)",
        )
        if name == "check":
            s.add_argument("--version", default=None, help="check against this version only")
        s.set_defaults(func=run_command(fn))

    s = subs.add_parser("delete", help="delete a subject or one version (soft; --permanent after)")
    s.add_argument("subject")
    s.add_argument("--version", default=None)
    s.add_argument("--permanent", action="store_true")
    s.set_defaults(func=run_command(cmd_delete))

    for name, key, values in (
        (
            "config",
            "compatibility",
            "NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE",
        ),
        ("mode", "mode", "READWRITE, READONLY, READONLY_OVERRIDE, IMPORT"),
    ):
        s = subs.add_parser(name, help=f"show or set the {key} (global, or of a subject)")
        s.add_argument("subject", nargs="?")
        s.add_argument("--set", metavar="VALUE", default=None, help=values)
        s.add_argument("--delete", action="store_true", help="remove the subject's own setting")
        s.set_defaults(func=run_command(cmd_config if name == "config" else cmd_mode))


# ---------------------------------------------------------------------------------------------- http
def _url(args: argparse.Namespace) -> str:
    return (args.registry or os.environ.get(ENV_URL) or DEFAULT_URL).rstrip("/")


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    url = _url(args) + path
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": CT, "Accept": CT}
    user = args.user or os.environ.get("MOLDAU_SCHEMA_REGISTRY_USER")
    if user:
        headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    ctx = ssl.create_default_context(cafile=args.ca) if args.ca else None
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read())
            msg = f"{err.get('message')} (error {err.get('error_code')})"
        except ValueError:
            msg = f"HTTP {e.code}"
        raise CliError(msg) from None
    except urllib.error.URLError as e:
        raise CliError(f"cannot reach the schema registry at {_url(args)}: {e.reason}") from None


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
    except OSError as e:
        raise UsageError(f"{args.file}: {e.strerror}") from None
    stype = args.type
    if stype is None:
        ext = os.path.splitext(args.file)[1].lower()
        stype = {".proto": "PROTOBUF", ".json": "JSON"}.get(ext, "AVRO")
    body: dict[str, Any] = {"schema": text}
    if stype != "AVRO":
        body["schemaType"] = stype
    refs = []
    for r in args.reference:
        name, eq, rest = r.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not eq or not colon or not version.lstrip("-").isdigit():
            raise UsageError(f"--reference {r!r}: expected NAME=SUBJECT:VERSION")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


# ---------------------------------------------------------------------------------------------- commands
def cmd_list(args: argparse.Namespace) -> int:
    query = urllib.parse.urlencode(
        {"subjectPrefix": args.prefix, "deleted": str(args.deleted).lower(), "latestOnly": "true"}
    )
    rows = _call(args, "GET", f"/schemas?{query}")
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ["SUBJECT", "VERSION", "ID", "TYPE"],
        [(r["subject"], r["version"], r["id"], r.get("schemaType", "AVRO")) for r in rows],
    )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    if args.id is not None:
        print_json(_call(args, "GET", f"/schemas/ids/{args.id}"))
    elif not args.subject:
        raise UsageError("a subject or --id")
    elif args.versions:
        print_json(_call(args, "GET", f"/subjects/{_q(args.subject)}/versions"))
    else:
        print_json(_call(args, "GET", f"/subjects/{_q(args.subject)}/versions/{_q(args.version)}"))
    return 0


def cmd_register(args: argparse.Namespace) -> int:
    body = _schema_body(args)
    got = _call(args, "POST", f"/subjects/{_q(args.subject)}/versions", body)
    found = _call(args, "POST", f"/subjects/{_q(args.subject)}", body)
    print(f"registered {args.subject} version {found['version']} id {got['id']}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    path = f"/compatibility/subjects/{_q(args.subject)}/versions"
    if args.version is not None:
        path += f"/{_q(args.version)}"
    got = _call(args, "POST", path + "?verbose=true", _schema_body(args))
    if got.get("is_compatible"):
        print(f"compatible with {args.subject}")
        return 0
    print(f"NOT compatible with {args.subject}:")
    for m in got.get("messages") or []:
        print(f"  {m}")
    return 1


def cmd_delete(args: argparse.Namespace) -> int:
    path = f"/subjects/{_q(args.subject)}"
    if args.version is not None:
        path += f"/versions/{_q(args.version)}"
    if args.permanent:
        path += "?permanent=true"
    got = _call(args, "DELETE", path)
    print(f"deleted {args.subject} version(s) {got}{' permanently' if args.permanent else ''}")
    return 0


def _setting(args: argparse.Namespace, root: str, key: str, answer_key: str) -> int:
    path = f"/{root}" + (f"/{_q(args.subject)}" if args.subject else "")
    if args.delete:
        if not args.subject:
            raise UsageError("--delete needs a subject")
        print(_call(args, "DELETE", path).get(answer_key))
    elif args.set:
        print(_call(args, "PUT", path, {key: args.set.upper()}).get(key))
    else:
        print(_call(args, "GET", path + ("?defaultToGlobal=true" if args.subject else "")).get(answer_key))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    return _setting(args, "config", "compatibility", "compatibilityLevel")


def cmd_mode(args: argparse.Namespace) -> int:
    return _setting(args, "mode", "mode", "mode")
