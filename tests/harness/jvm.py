"""The JVM peer harness: Kafka's Java clients, tools and broker, run with ``java -cp``.

Each module is a folder under ``tests/jvm`` with a small ``pom.xml`` (its parent ``tests/jvm/pom.xml`` holds
the one Kafka version of all of them) and, optionally, Java sources in ``src/main/java`` and resources in
``src/main/resources``. ``classpath(module)`` resolves the module's runtime dependencies with Maven
(``dependency:build-classpath``: the jars stay in Maven's local repository), compiles its sources with javac
and caches the result OUTSIDE the repository, in ``$MOLDAU_JVM_CACHE`` or
``${XDG_CACHE_HOME:-~/.cache}/moldau-jvm/<module>-<digest>/``, keyed by a digest of the poms and sources: a
second call, or a test run after ``scripts/setup.sh --test`` warmed the cache, starts no Maven and downloads
nothing. ``java(module, main_class, args)`` starts a JVM on that classpath with a capped heap.

Modules may be nested (``apps/streams``): a module is any folder below ``tests/jvm`` with a ``pom.xml``.

Command line (``scripts/setup.sh --test`` runs ``warm``)::

    python tests/harness/jvm.py warm [MODULE ...]      resolve and compile every module (or the ones named)
    python tests/harness/jvm.py classpath MODULE       print the module's classpath
    python tests/harness/jvm.py run MODULE MAIN [ARG ...]  run a main class on the module's classpath
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

log = logging.getLogger(__name__)

#: the folder of the JVM modules (tests/jvm)
HERE = Path(__file__).resolve().parent.parent / "jvm"
PARENT_POM = HERE / "pom.xml"
#: a log4j2 configuration for every JVM started here: warnings and errors to stderr, nothing else
LOG4J2_CONFIG = HERE / "log4j2.properties"
DEFAULT_HEAP = "512m"
MAVEN_TIMEOUT_S = 1800.0
JAVAC_TIMEOUT_S = 600.0


class JvmError(RuntimeError):
    """Maven or javac failed, or a module does not exist."""


def _pom_property(name: str) -> str:
    m = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", PARENT_POM.read_text())
    if m is None:
        raise JvmError(f"{PARENT_POM.name} has no <{name}> property")
    return m.group(1).strip()


#: the Apache Kafka version of every module (clients, tools, broker)
KAFKA_VERSION = _pom_property("kafka.version")


def cache_root() -> Path:
    override = os.environ.get("MOLDAU_JVM_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moldau-jvm"


def modules() -> list[str]:
    """Every module: the folders below tests/jvm with a pom.xml, as paths relative to tests/jvm."""
    found = []
    for pom in sorted(HERE.rglob("pom.xml")):
        if pom == PARENT_POM or "target" in pom.relative_to(HERE).parts:
            continue
        found.append(pom.parent.relative_to(HERE).as_posix())
    return found


def module_dir(module: str) -> Path:
    d = (HERE / module).resolve()
    if not (d / "pom.xml").is_file() or HERE not in d.parents:
        raise JvmError(f"no JVM module {module!r} (expected tests/jvm/{module}/pom.xml)")
    return d


def _sources(d: Path, sub: str) -> list[Path]:
    root = d / "src" / "main" / sub
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def digest(module: str) -> str:
    """A digest of everything the module's build depends on: the parent pom, its pom and its sources."""
    d = module_dir(module)
    h = hashlib.sha256()
    for path in [PARENT_POM, d / "pom.xml", *_sources(d, "java"), *_sources(d, "resources")]:
        h.update(path.relative_to(HERE).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def _cache_dir(module: str) -> Path:
    return cache_root() / f"{module.replace('/', '_')}-{digest(module)}"


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """One build of a module at a time (setup, parallel test sessions and engineers share the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run_tool(cmd: list[str], cwd: Path, timeout: float, what: str) -> None:
    log.debug("%s: %s", what, " ".join(cmd))
    try:
        done = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except FileNotFoundError as exc:
        raise JvmError(f"{what}: {cmd[0]} not found (scripts/setup.sh --test installs Maven and a JDK)") \
            from exc
    except subprocess.TimeoutExpired as exc:
        raise JvmError(f"{what}: no result within {timeout:.0f}s: {' '.join(cmd)}") from exc
    if done.returncode != 0:
        out = (done.stdout + done.stderr)[-6000:]
        raise JvmError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n{out}")


def _build(module: str, dest: Path) -> None:
    d = module_dir(module)
    log.info("%s: resolving with Maven and compiling into %s", module, dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        cp_file = work / "dependencies.txt"
        _run_tool(["mvn", "-B", "-q", "-f", str(d / "pom.xml"), "dependency:build-classpath",
                   "-DincludeScope=runtime", f"-Dmdep.outputFile={cp_file}"],
                  d, MAVEN_TIMEOUT_S, f"maven ({module})")
        deps = [p for p in cp_file.read_text().strip().split(os.pathsep) if p]
        entries: list[str] = []
        java_sources = _sources(d, "java")
        resources = _sources(d, "resources")
        if java_sources or resources:
            classes = work / "classes"
            classes.mkdir()
            entries.append(str(dest / "classes"))
            for res in resources:
                target = classes / res.relative_to(d / "src" / "main" / "resources")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(res, target)
            if java_sources:
                release = _pom_property("maven.compiler.release")
                _run_tool(["javac", "--release", release, "-encoding", "UTF-8", "-nowarn",
                           "-d", str(classes), "-cp", os.pathsep.join(deps),
                           *[str(s) for s in java_sources]],
                          d, JAVAC_TIMEOUT_S, f"javac ({module})")
        (work / "classpath.json").write_text(json.dumps({"module": module, "classpath": entries + deps}))
        if dest.exists():
            shutil.rmtree(dest)
        work.rename(dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _cached(dest: Path) -> list[str] | None:
    try:
        cp: list[str] = json.loads((dest / "classpath.json").read_text())["classpath"]
    except (OSError, ValueError, KeyError):
        return None
    # Maven's local repository may have been cleaned since: then resolve again
    return cp if all(Path(p).exists() for p in cp) else None


def classpath(module: str) -> list[str]:
    """The module's classpath (its compiled classes, then its runtime dependencies), built on first use."""
    dest = _cache_dir(module)
    cp = _cached(dest)
    if cp is not None:
        return cp
    with _lock(cache_root() / ".lock"):
        cp = _cached(dest)
        if cp is None:
            _build(module, dest)
            cp = _cached(dest)
            if cp is None:
                raise JvmError(f"{module}: the classpath built in {dest} names missing files")
    return cp


def java_binary() -> str:
    """``$MOLDAU_JAVA``, else ``$JAVA_HOME/bin/java``, else ``java`` on PATH (Java 17 or newer)."""
    explicit = os.environ.get("MOLDAU_JAVA")
    if explicit:
        return explicit
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise JvmError("no java on PATH (scripts/setup.sh --test installs a JDK)")
    return found


def java_command(module: str, main_class: str, args: Sequence[str] = (), *, heap: str = DEFAULT_HEAP,
                 jvm_args: Sequence[str] = ()) -> list[str]:
    """The command line that runs ``main_class`` of ``module`` with a heap capped at ``heap``."""
    return [
        java_binary(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        *jvm_args, "-cp", os.pathsep.join(classpath(module)), main_class, *args,
    ]


def java(module: str, main_class: str, args: Sequence[str] = (), *, heap: str = DEFAULT_HEAP,
         jvm_args: Sequence[str] = (), **popen: Any) -> subprocess.Popen[Any]:
    """Start ``main_class`` of ``module`` (``subprocess.Popen``; keyword arguments go to Popen).

    stdin defaults to /dev/null; the caller owns the process (wait, or kill and wait)."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(java_command(module, main_class, args, heap=heap, jvm_args=jvm_args), **popen)


def run(module: str, main_class: str, args: Sequence[str] = (), *, timeout: float = 120.0,
        heap: str = DEFAULT_HEAP, jvm_args: Sequence[str] = (), input: str | None = None,
        check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``main_class`` to completion and return its output (text); ``check``: raise on a non-zero exit."""
    cmd = java_command(module, main_class, args, heap=heap, jvm_args=jvm_args)
    done = subprocess.run(cmd, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, env=env)
    if check and done.returncode != 0:
        raise JvmError(f"{main_class} exited with {done.returncode}\n--- stdout ---\n{done.stdout[-4000:]}"
                       f"\n--- stderr ---\n{done.stderr[-6000:]}")
    return done


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of a program's output (the test programs print one per event)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


class JsonProcess:
    """A running JVM program whose stdout JSON lines are collected as they come (a reader thread); stderr goes
    to a file. ``wait_for(predicate)`` waits for an event; ``close_stdin()`` asks programs that watch stdin
    to finish; ``finish()`` waits for the exit (killing it after the timeout) and returns the exit code."""

    def __init__(self, module: str, main_class: str, args: Sequence[str] = (), *, stderr_path: Path,
                 heap: str = DEFAULT_HEAP, jvm_args: Sequence[str] = ()) -> None:
        import threading

        self.events: list[dict[str, Any]] = []
        self.stderr_path = stderr_path
        self._err = open(stderr_path, "wb")
        self._cond = threading.Condition()
        self.proc = java(module, main_class, args, heap=heap, jvm_args=jvm_args, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=self._err, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            for ev in json_lines(line):
                with self._cond:
                    self.events.append(ev)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Any, timeout: float, what: str = "an event") -> dict[str, Any]:
        """The first event for which ``predicate(event)`` is true; raises (with the program's stderr) when
        none came within ``timeout`` seconds or the program exited first."""
        import time

        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for ev in self.events:
                    if predicate(ev):
                        return ev
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    break
                self._cond.wait(min(left, 0.5))
        raise AssertionError(f"no {what} within {timeout:.0f}s (exit code {self.proc.poll()}); events: "
                             f"{self.events[-10:]}\n--- stderr ---\n{self.stderr()}")

    def stderr(self, limit: int = 6000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def finish(self, timeout: float = 60.0) -> int:
        self.close_stdin()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=10)
        self._err.close()
        return code


def main(argv: Sequence[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="jvm.py: %(message)s")
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(__doc__ or "")
        return 0 if argv else 2
    cmd, rest = argv[0], list(argv[1:])
    if cmd == "warm":
        for module in rest or modules():
            cp = classpath(module)
            log.info("%s: %d classpath entries (Kafka %s)", module, len(cp), KAFKA_VERSION)
        return 0
    if cmd == "classpath" and len(rest) == 1:
        sys.stdout.write(os.pathsep.join(classpath(rest[0])) + "\n")
        return 0
    if cmd == "run" and len(rest) >= 2:
        return java(rest[0], rest[1], rest[2:], stdin=None).wait()
    sys.stderr.write(__doc__ or "")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
