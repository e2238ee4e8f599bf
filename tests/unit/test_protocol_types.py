"""The message types a type checker sees (the generated .pyi stubs) against the run-time declarations.

A message's name is its declaration (moldau.protocol.schema.Message) at run time and a class in the stubs;
the declaration behaves like that class (call, isinstance, nested struct classes), and the stubs declare
exactly the attributes and structs the generated classes have.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from moldau.protocol import messages as m
from moldau.protocol.errors import ErrorCode

MESSAGES_DIR = Path(m.__file__).parent


def _stub_classes() -> dict[str, ast.ClassDef]:
    out: dict[str, ast.ClassDef] = {}
    for pyi in MESSAGES_DIR.glob("*.pyi"):
        for node in ast.parse(pyi.read_text()).body:
            if isinstance(node, ast.ClassDef):
                out[node.name] = node
    return out


STUBS = _stub_classes()


def _annotated(cls: ast.ClassDef) -> set[str]:
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def test_declaration_acts_as_its_class() -> None:
    req = m.ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
        m.ProduceRequest.TopicProduceData(name="t", partition_data=[
            m.ProduceRequest.PartitionProduceData(index=0, records=b"")])])
    assert isinstance(req, m.ProduceRequest)
    assert not isinstance(req, m.ProduceResponse)
    assert not isinstance(req.topic_data[0], m.ProduceRequest)
    assert type(req) is m.ProduceRequest.cls
    assert req == m.ProduceRequest.new(acks=-1, timeout_ms=30000, topic_data=req.topic_data)
    with pytest.raises(TypeError):
        m.ProduceRequest(ackz=1)


@pytest.mark.parametrize("name", sorted(m.ALL))
def test_stub_matches_generated_classes(name: str) -> None:
    msg = m.ALL[name]
    stub = STUBS[name]
    assert stub.bases
    base = stub.bases[0]
    if msg.api_key is not None and name.endswith("Request"):
        # ApiRequest[<its response>]: what Connection.send of the request resolves to
        assert isinstance(base, ast.Subscript) and isinstance(base.value, ast.Name), ast.dump(base)
        assert base.value.id == "ApiRequest"
        assert isinstance(base.slice, ast.Name) and base.slice.id == name[: -len("Request")] + "Response"
        assert base.slice.id in m.ALL
    else:
        assert isinstance(base, ast.Name), ast.dump(base)
        assert base.id == ("ApiMessage" if msg.api_key is not None else "DataMessage")
    assert _annotated(stub) == set(msg.cls._fields)
    nested = {n.name: n for n in stub.body if isinstance(n, ast.ClassDef)}
    assert set(nested) == set(msg.classes) - {name}
    for sname, cls in nested.items():
        assert _annotated(cls) == set(msg.classes[sname]._fields), sname


def test_error_codes_are_written_out() -> None:
    """ErrorCode members are plain class attributes a type checker sees (not built from a table at run
    time)."""
    source = Path(sys.modules[ErrorCode.__module__].__file__ or "").read_text()
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ErrorCode")
    written = {t.id for n in cls.body if isinstance(n, ast.Assign)
               for t in n.targets if isinstance(t, ast.Name)}
    assert written == {e.name for e in ErrorCode}
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER == 6 and ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode(3) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ErrorCode.of(9999) is ErrorCode.UNKNOWN_SERVER_ERROR


@pytest.mark.skipif(shutil.which("mypy", path=str(Path(sys.executable).parent)) is None,
                    reason="mypy not installed")
def test_mypy_checks_message_fields(tmp_path: Path) -> None:
    """mypy accepts correct use of the message classes and reports wrong field names and types."""
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""
        from moldau.protocol import messages as m
        from moldau.protocol.errors import ErrorCode
        from moldau.protocol.messages import ProduceRequest, ProduceResponse

        def handle(req: ProduceRequest) -> ProduceResponse:
            parts = [ProduceResponse.PartitionProduceResponse(index=pd.index, error_code=ErrorCode.NONE)
                     for td in req.topic_data for pd in td.partition_data]
            name: str = req.topic_data[0].name
            tid: str | None = req.transactional_id
            return m.ProduceResponse.new(responses=[
                ProduceResponse.TopicProduceResponse(name=name + (tid or ""), partition_responses=parts)])
    """))
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        from moldau.protocol.messages import ProduceRequest, ProduceResponse

        def handle(req: ProduceRequest) -> ProduceResponse:
            n: int = req.topic_data[0].name
            req.ackz
            return ProduceResponse.new(throttle_time_ms="0")
    """))
    mypy = [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
            "--config-file=", "--ignore-missing-imports"]
    ok = subprocess.run([*mypy, str(good)], capture_output=True, text=True, timeout=240)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    ko = subprocess.run([*mypy, str(bad)], capture_output=True, text=True, timeout=240)
    assert ko.returncode == 1, ko.stdout + ko.stderr
    assert ('Incompatible types in assignment (expression has type "str", variable has type "int")'
            in ko.stdout)
    assert '"ProduceRequest" has no attribute "ackz"' in ko.stdout
    assert ('Argument "throttle_time_ms" to "new" of "ProduceResponse" has incompatible type "str"'
            in ko.stdout)
