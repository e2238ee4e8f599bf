"""The client's static types: the resolved configs' TypedDicts follow the ConfigDef tables, and what an
application's type checker sees of the public API (mypy run on a snippet, its ``reveal_type`` notes read)."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from moldau.client import config as cfg

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize(
    ("typed", "tables"),
    [
        (cfg.ClientConfig, [cfg.COMMON, cfg.ADMIN]),
        (cfg.ProducerConfig, [cfg.COMMON, cfg.PRODUCER]),
        (cfg.ConsumerConfig, [cfg.COMMON, cfg.CONSUMER]),
        (cfg.ShareConsumerConfig, [cfg.COMMON, cfg.SHARE_CONSUMER]),
    ],
)
def test_config_typed_dicts_match_the_tables(typed: type, tables: list[dict[str, cfg.ConfigDef]]) -> None:
    names = {n for t in tables for n in t}
    assert set(typed.__annotations__) == names
    assert typed.__required_keys__ == names  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["producer", "consumer", "share_consumer", "admin"])
def test_resolved_config_has_every_typed_key(kind: str) -> None:
    typed = {"producer": cfg.ProducerConfig, "consumer": cfg.ConsumerConfig,
             "share_consumer": cfg.ShareConsumerConfig, "admin": cfg.ClientConfig}[kind]
    resolved = cfg.resolve_config(kind, {"group.id": "g"} if "consumer" in kind else None, {})  # type: ignore[call-overload]
    assert set(resolved) == set(typed.__annotations__)


SNIPPET = """
from moldau.client import Admin, AsyncConsumer, AsyncProducer, AsyncShareConsumer, Consumer, Producer
from moldau.client.config import resolve_config
from moldau.client.conn import Connection
from moldau.client.types import TopicPartition
from moldau.protocol import messages as m


async def main(conn: Connection) -> None:
    plain = AsyncConsumer("t", bootstrap_servers="h:9092")
    reveal_type((await plain.poll())[0].value)
    typed: AsyncConsumer[str, dict[str, int]] = AsyncConsumer("t", value_deserializer=lambda b: {})
    reveal_type((await typed.poll())[0].value)
    async for rec in typed:
        reveal_type(rec.key)
    share: AsyncShareConsumer[str, str] = AsyncShareConsumer("t", group_id="g")
    reveal_type((await share.poll())[0].value)
    reveal_type(Consumer("t").poll()[0].value)
    reveal_type(resolve_config("producer", None, {})["linger.ms"])
    reveal_type(resolve_config("consumer", None, {})["group.id"])
    reveal_type(await conn.send(3, m.MetadataRequest.new(topics=None)))
    reveal_type(await typed.position(TopicPartition("t", 0)))
    producer: AsyncProducer[str, dict[str, int]] = AsyncProducer(value_serializer=lambda v: b"")
    reveal_type(await (await producer.send("t", {"a": 1}, key="k", headers=[("h", b"1")])))
    reveal_type(Producer().send("t", b"v", key=memoryview(b"k")))
    reveal_type(Admin().list_topics())
    reveal_type(Admin().describe_configs([]))
"""

EXPECTED = [
    "bytes | None",
    "dict[str, int]",
    "str",
    "str",
    "bytes | None",
    "int",
    "str | None",
    "moldau.protocol.messages.metadata.MetadataResponse",
    "int",
    "tuple[str, int, int, int, fallback=moldau.client.types.RecordMetadata]",
    "tuple[moldau.client.futures.BatchResult, int, int, fallback=moldau.client.futures.RecordFuture]",
    "dict[str, int]",
    "dict[moldau.client.types.ConfigResource, dict[str, moldau.client.types.ConfigEntry]]",
]

# what a type checker refuses: an int value without a serializer, a value of another type than declared,
# a str where a TopicPartition goes, an unknown config name of a resolved config
WRONG = """
from moldau.client import AsyncConsumer, AsyncProducer
from moldau.client.config import resolve_config


async def main() -> None:
    await AsyncProducer().send("t", 42)
    typed: AsyncProducer[str, dict[str, int]] = AsyncProducer()
    await typed.send("t", "not a dict")
    await AsyncConsumer().position("t-0")
    resolve_config("consumer", None, {})["linger.ms"]
"""


def _mypy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str) -> str:
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "app.py"
    snippet.write_text(textwrap.dedent(code))
    monkeypatch.setenv("MYPYPATH", str(SRC))  # this checkout's moldau, not an installed one
    out, err, _status = api.run([
        "--config-file", os.devnull, "--no-incremental", "--cache-dir", os.devnull, "--strict",
        "--ignore-missing-imports", "--follow-imports", "silent", "--python-version", "3.11", str(snippet),
    ])
    return out + err


def test_what_an_application_type_checker_sees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _mypy(tmp_path, monkeypatch, SNIPPET)
    revealed = re.findall(r'Revealed type is "([^"]*)"', out)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not errors, out
    assert revealed == EXPECTED, out


def test_what_an_application_type_checker_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _mypy(tmp_path, monkeypatch, WRONG)
    lines = sorted({int(n) for n in re.findall(r"app\.py:(\d+): error:", out)})
    assert lines == [7, 9, 10, 11], out


def test_the_blocking_admin_declares_every_async_admin_call() -> None:
    """sync.Admin's methods come from __getattr__ at run time; the declarations type checkers read must be
    AsyncAdmin's coroutine methods, same parameters and results."""
    import ast
    import inspect

    from moldau.client.admin import AsyncAdmin

    tree = ast.parse((SRC / "moldau" / "client" / "sync.py").read_text())
    admin = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Admin")
    block = next(n for n in admin.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    declared = {f.name: f for f in block.body if isinstance(f, ast.FunctionDef)}
    calls = {n for n in dir(AsyncAdmin) if not n.startswith("_") and n not in ("start", "close")
             and inspect.iscoroutinefunction(getattr(AsyncAdmin, n))}
    assert set(declared) == calls
    for name, f in declared.items():
        src = textwrap.dedent(inspect.getsource(getattr(AsyncAdmin, name)))
        a = ast.parse(src).body[0]
        assert isinstance(a, ast.AsyncFunctionDef)
        assert ast.unparse(f.args) == ast.unparse(a.args), name
        assert ast.unparse(f.returns) == ast.unparse(a.returns), name  # type: ignore[arg-type]
