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
from moldau.client import AsyncConsumer, AsyncShareConsumer, Consumer, Producer, AsyncProducer
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
]


def test_what_an_application_type_checker_sees(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "app.py"
    snippet.write_text(textwrap.dedent(SNIPPET))
    env_path = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(SRC)
    try:
        out, err, status = api.run([
            "--config-file", os.devnull, "--no-incremental", "--cache-dir", os.devnull, "--strict",
            "--ignore-missing-imports", "--follow-imports", "silent", "--python-version", "3.11", str(snippet),
        ])
    finally:
        if env_path is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = env_path
    revealed = re.findall(r'Revealed type is "([^"]*)"', out)
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not errors, out + err
    assert revealed == EXPECTED, out
