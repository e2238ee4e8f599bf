import subprocess
import sys

import pytest

from moldau.broker.config import ConfigError
from moldau.cli.broker_cmd import resolve_config
from moldau.cli.main import build_parser


def parse(*argv):
    return build_parser().parse_args(["broker", *argv])


def test_flags_and_set(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("listeners=PLAINTEXT://0.0.0.0:9999\nnum.partitions=2\n")
    cfg = resolve_config(parse("--config", str(f), "--set", "num.partitions=4", "--port", "1234",
                               "--data-dir", str(tmp_path / "d")), env={})
    assert cfg.get("num.partitions") == 4
    assert [(lst.host, lst.port) for lst in cfg.listeners] == [("0.0.0.0", 1234)]
    assert cfg.log_dirs == [str(tmp_path / "d")]
    cfg = resolve_config(parse(), env={})
    assert (cfg.listeners[0].host, cfg.listeners[0].port) == ("127.0.0.1", 9092)


def test_unknown_key_rejected():
    with pytest.raises(ConfigError):
        resolve_config(parse("--set", "no.such=1"), env={})


def test_unknown_key_exit_code():
    r = subprocess.run([sys.executable, "-m", "moldau", "broker", "--set", "no.such.key=1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["moldau broker: error: Unknown configuration key 'no.such.key'"]
