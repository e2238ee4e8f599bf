"""Pack moldau and its dependencies into an archive for Spark executors (``spark.archives``).

Spark's "Python Package Management" guide ships a job's Python packages to the executors as a packed
virtualenv: ``spark.archives=env.tar.gz#environment`` unpacks it into every executor's working directory
and ``PYSPARK_PYTHON=./environment/bin/python`` runs the workers there. moldau needs that route rather than
``--py-files``: its dependencies ``crc32c`` and ``cramjam`` (and pyarrow, numpy) are compiled extension
modules, which cannot be imported from a zip.

``python -m moldau.spark.pack moldau-env.tar.gz`` writes such an archive from the running environment,
laid out as a virtualenv (what venv-pack produces): ``pyvenv.cfg``, ``bin/python`` (a symlink to this
environment's base interpreter, so the executors need the same Python at the same path, as with
venv-pack), and ``lib/pythonX.Y/site-packages`` holding moldau (also from an editable install, which
venv-pack refuses) and the installed distributions it needs: ``crc32c``, ``cramjam``, ``uvloop``, and
with the ``spark`` extra ``pyarrow``, ``numpy``, ``pandas`` and their own dependencies. ``pyspark`` and
``py4j`` are left out: Spark puts its own on the workers' PYTHONPATH. See docs/spark.md, "On a cluster".
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import io
import logging
import os
import re
import sys
import tarfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_EXCLUDE", "distributions", "pack_environment"]

#: supplied by Spark itself on every worker's PYTHONPATH (pyspark.zip, py4j-*.zip)
DEFAULT_EXCLUDE = frozenset({"pyspark", "py4j"})
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(dist: md.Distribution, extras: Iterable[str]) -> Iterator[str]:
    """Names of ``dist``'s requirements that apply: unconditional ones and those of ``extras``.

    Other environment markers (platform, Python version) are not evaluated: a requirement is taken when
    the distribution is installed here, which is what this environment's installer decided.
    """
    wanted = {_norm(e) for e in extras}
    for req in dist.requires or ():
        m = _NAME.match(req)
        if m is None:
            continue
        marker = req.split(";", 1)[1] if ";" in req else ""
        extra = _EXTRA.search(marker)
        if extra is not None and _norm(extra.group(1)) not in wanted:
            continue
        yield m.group(1)


def distributions(root: str = "moldau", extras: Iterable[str] = ("spark",),
                  exclude: Iterable[str] = DEFAULT_EXCLUDE) -> dict[str, md.Distribution]:
    """The installed distributions ``root`` (with ``extras``) needs, by normalised name, ``root`` included."""
    skip = {_norm(e) for e in exclude}
    found: dict[str, md.Distribution] = {}
    todo: list[tuple[str, Iterable[str]]] = [(root, tuple(extras))]
    while todo:
        name, ex = todo.pop()
        key = _norm(name)
        if key in found or key in skip:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            log.debug("%s is not installed here: not packed", name)
            continue
        found[key] = dist
        todo.extend((r, ()) for r in _requirements(dist, ex))
    return found


def _dist_files(dist: md.Distribution, site: str) -> Iterator[tuple[Path, str]]:
    """(file on disk, path inside site-packages) of an installed distribution, without bytecode caches."""
    for f in dist.files or ():
        rel = Path(str(f))
        if rel.parts and rel.parts[0] == ".." or "__pycache__" in rel.parts:
            continue  # scripts in bin/ and compiled bytecode: not needed by the workers
        src = Path(str(dist.locate_file(f)))
        if src.is_file():
            yield src, f"{site}/{rel.as_posix()}"


def _package_files(pkg_dir: Path, site: str) -> Iterator[tuple[Path, str]]:
    for dirpath, dirnames, filenames in os.walk(pkg_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            yield p, f"{site}/{pkg_dir.name}/{p.relative_to(pkg_dir).as_posix()}"


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def pack_environment(output: str | os.PathLike[str], extras: Iterable[str] = ("spark",),
                     exclude: Iterable[str] = DEFAULT_EXCLUDE, compresslevel: int = 1) -> Path:
    """Write ``output`` (``.tar.gz``): a virtualenv layout with moldau and what it needs; returns its path.

    Use it with ``spark.archives=<output>#environment`` and ``PYSPARK_PYTHON=./environment/bin/python``.
    """
    import moldau

    out = Path(output)
    base = Path(getattr(sys, "_base_executable", "") or sys.executable).resolve()
    pyver = f"{sys.version_info[0]}.{sys.version_info[1]}"
    site = f"lib/python{pyver}/site-packages"
    dists = distributions("moldau", extras, exclude)
    moldau_dir = Path(moldau.__file__).resolve().parent
    moldau_dist = dists.pop("moldau", None)
    tmp = out.with_name(out.name + ".part")
    count = 0
    with tarfile.open(tmp, "w:gz", compresslevel=compresslevel) as tar:
        cfg = (f"home = {base.parent}\ninclude-system-site-packages = false\n"
               f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
        _add_bytes(tar, "pyvenv.cfg", cfg.encode())
        for alias in ("python", "python3", f"python{pyver}"):
            link = tarfile.TarInfo(f"bin/{alias}")
            link.type = tarfile.SYMTYPE
            link.linkname = str(base)
            link.mode = 0o777
            tar.addfile(link)
        # moldau from its package directory (an editable install has only a path hook in site-packages)
        for src, arc in _package_files(moldau_dir, site):
            tar.add(str(src), arcname=arc, recursive=False)
            count += 1
        if moldau_dist is not None:
            meta = moldau_dist.read_text("METADATA") or ""
            _add_bytes(tar, f"{site}/moldau-{moldau_dist.version}.dist-info/METADATA", meta.encode())
        for name, dist in sorted(dists.items()):
            for src, arc in _dist_files(dist, site):
                tar.add(str(src), arcname=arc, recursive=False)
                count += 1
    tmp.replace(out)
    log.info("packed moldau and %d distributions (%s), %d files, into %s (%.1f MB); interpreter %s",
             len(dists), ", ".join(sorted(dists)), count, out, out.stat().st_size / 1e6, base)
    return out


def unpack(archive: str | os.PathLike[str], directory: str | os.PathLike[str]) -> Path:
    """Unpack an archive from :func:`pack_environment` into ``directory`` (replacing what was there).

    The driver needs it too: PySpark runs a Python data source's planning (schema, partitions, the
    streaming source's offsets) in Python workers of the driver, started with the same relative
    ``./environment/bin/python`` as the executors, from the driver's working directory.
    """
    import shutil

    d = Path(directory)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(d, filter="fully_trusted")  # our own archive; bin/python links outside on purpose
    return d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m moldau.spark.pack",
        description="Pack moldau and its dependencies for Spark executors (spark.archives).")
    ap.add_argument("output", nargs="?", default="moldau-env.tar.gz", help="archive to write (.tar.gz)")
    ap.add_argument("--extra", action="append", default=None,
                    help="moldau extras whose dependencies go in too (default: spark)")
    ap.add_argument("--exclude", action="append", default=[],
                    help="a distribution to leave out (pyspark and py4j always are)")
    ap.add_argument("--unpack", metavar="DIR",
                    help="also unpack it into DIR (e.g. 'environment' in the driver's working directory)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = pack_environment(args.output, extras=args.extra if args.extra is not None else ("spark",),
                           exclude=DEFAULT_EXCLUDE | set(args.exclude))
    name = Path(args.unpack).name if args.unpack else "environment"
    if args.unpack:
        unpack(out, args.unpack)
        print(f"unpacked {out} into {args.unpack}")
    print(f"wrote {out}: run the driver with PYSPARK_PYTHON=./{name}/bin/python and "
          f"--archives {out}#{name} (spark.archives)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
