"""The options ``moldau groups`` (consumer groups) and ``moldau share-groups`` (share groups) share: the
list, describe, delete and reset-offsets sub-commands, defined once for both."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .common import add_connection_args, add_json_arg, run_command

Command = Callable[[argparse.Namespace], int]


def add_output_args(p: argparse.ArgumentParser) -> None:
    """``--json`` and the connection options, which every group sub-command takes."""
    add_json_arg(p)
    add_connection_args(p)


def _finish(p: argparse.ArgumentParser, func: Command) -> argparse.ArgumentParser:
    add_output_args(p)
    p.set_defaults(func=run_command(func))
    return p


def add_list(cmds: Any, func: Command, *, help: str, examples: str) -> argparse.ArgumentParser:
    lst = cmds.add_parser("list", help=help, examples=examples)
    lst.add_argument("--state", action="append", default=[],
                     help="only groups in this state (Stable, Empty, ...; repeatable)")
    return _finish(lst, func)


def add_describe(cmds: Any, func: Command, *, help: str, examples: str,
                 views: list[tuple[str, str]]) -> argparse.ArgumentParser:
    """``describe GROUP...`` with one of ``views`` (``("--members", help)``, ...) at most."""
    d = cmds.add_parser("describe", help=help, examples=examples)
    d.add_argument("groups", nargs="+", metavar="GROUP")
    show = d.add_mutually_exclusive_group()
    for flag, text in views:
        show.add_argument(flag, action="store_true", help=text)
    return _finish(d, func)


def add_delete(cmds: Any, func: Command, *, help: str, examples: str) -> argparse.ArgumentParser:
    dl = cmds.add_parser("delete", help=help, examples=examples)
    dl.add_argument("groups", nargs="+", metavar="GROUP")
    return _finish(dl, func)


def add_reset_offsets(cmds: Any, func: Command, *, help: str, examples: str, topic_metavar: str,
                      topic_help: str, all_topics_help: str, datetime_help: str,
                      current_and_shift: bool) -> argparse.ArgumentParser:
    """``reset-offsets GROUP`` with its topics, one scenario (``--to-earliest``, ...; ``--to-current`` and
    ``--shift-by`` where ``current_and_shift``) and ``--execute`` or ``--dry-run`` (the default)."""
    r = cmds.add_parser("reset-offsets", help=help, examples=examples)
    r.add_argument("group", metavar="GROUP")
    r.add_argument("--topic", action="append", default=[], metavar=topic_metavar, help=topic_help)
    r.add_argument("--all-topics", action="store_true", help=all_topics_help)
    scen = r.add_mutually_exclusive_group(required=True)
    scen.add_argument("--to-earliest", action="store_true", help="to the earliest offset")
    scen.add_argument("--to-latest", action="store_true", help="to the log end offset")
    if current_and_shift:
        scen.add_argument("--to-current", action="store_true", help="to the committed offset (no change)")
    scen.add_argument("--to-offset", type=int, metavar="N", help="to offset N (clamped to the log)")
    scen.add_argument("--to-datetime", metavar="TIME", help=datetime_help)
    if current_and_shift:
        scen.add_argument("--shift-by", type=int, metavar="N", help="move by N (negative: back)")
    scen.add_argument("--by-duration", metavar="DURATION",
                      help="to the first offset of DURATION ago (15m, 2h, 1d, PT1H30M)")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="apply the new offsets")
    mode.add_argument("--dry-run", action="store_true", help="only show them (the default)")
    return _finish(r, func)


def assignment_text(items: list[dict[str, Any]]) -> str:
    """A member's assignment as ``topic:0,1 other:2`` (``-``: none)."""
    by_topic: dict[str, list[int]] = {}
    for it in items:
        by_topic.setdefault(it["topic"], []).append(it["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"
