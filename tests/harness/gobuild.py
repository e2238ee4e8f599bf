"""The Go peer harness: Go programs under ``tests/go`` (franz-go clients) built with the Go toolchain.

Each program is a folder under ``tests/go`` with its own ``go.mod`` and ``go.sum`` (the module versions are
pinned there). ``binary(program)`` builds it with ``go build`` into a cache OUTSIDE the repository,
``$MOLDAU_GO_CACHE`` or ``${XDG_CACHE_HOME:-~/.cache}/moldau-go/<program>-<digest>/``, keyed by a digest of
its ``go.mod``, ``go.sum`` and ``.go`` sources: a second call, or a test run after ``scripts/setup.sh --test``
warmed the cache, builds and downloads nothing. The Go modules come from the Go module proxy into Go's own
module cache.

Command line (``scripts/setup.sh --test`` runs ``warm``)::

    python tests/harness/gobuild.py warm [PROGRAM ...]   build every program (or the ones named)
    python tests/harness/gobuild.py path PROGRAM          print the program's binary (building it if needed)
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

#: the folder of the Go programs (tests/go)
HERE = Path(__file__).resolve().parent.parent / "go"
BUILD_TIMEOUT_S = 900.0


class GoError(RuntimeError):
    """No Go toolchain, or a program does not exist or does not build."""


def go_tool() -> str | None:
    return shutil.which("go")


def cache_root() -> Path:
    override = os.environ.get("MOLDAU_GO_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moldau-go"


def programs() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/go.mod"))


def _sources(program: str) -> list[Path]:
    d = HERE / program
    if not (d / "go.mod").is_file():
        raise GoError(f"no Go program {program!r} (expected tests/go/{program}/go.mod)")
    return [d / "go.mod", d / "go.sum", *sorted(d.glob("*.go"))]


def digest(program: str) -> str:
    h = hashlib.sha256()
    for path in _sources(program):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def binary(program: str) -> Path:
    """The program's binary, built into the cache first if it is not there yet."""
    out_dir = cache_root() / f"{program}-{digest(program)}"
    exe = out_dir / program
    if exe.is_file():
        return exe
    go = go_tool()
    if go is None:
        raise GoError("no Go toolchain: `go` is not on PATH (install Go 1.24 or newer)")
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not exe.is_file():
            tmp = out_dir / f".{program}.tmp"
            env = {**os.environ, "GOFLAGS": "-mod=readonly"}
            proc = subprocess.run(
                [go, "build", "-trimpath", "-o", str(tmp), "."],
                cwd=HERE / program,
                env=env,
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
            )
            if proc.returncode != 0:
                raise GoError(f"go build of {program} failed:\n{proc.stdout}{proc.stderr}")
            tmp.replace(exe)
    return exe


def binary_or_skip(program: str) -> Path:
    """``binary(program)`` for a test: skips it if the binary is not built and there is no Go toolchain."""
    import pytest

    try:
        return binary(program)
    except GoError as e:
        if go_tool() is None:  # not built yet and no toolchain to build it
            pytest.skip(str(e))
        raise


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "warm":
        for program in argv[1:] or programs():
            print(f"gobuild: {program}: {binary(program)}")
        return 0
    if len(argv) == 2 and argv[0] == "path":
        print(binary(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except GoError as e:
        print(f"gobuild: {e}", file=sys.stderr)
        sys.exit(1)
