"""Request handlers, one module per API (``kNN_name.py``). Importing this package imports every module in it,
and each module registers itself with ``moldau.broker.registry.handler``."""

from __future__ import annotations

import importlib
import logging
import pkgutil

log = logging.getLogger(__name__)


def _load_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("k") and info.name[1:3].isdigit():
            try:
                importlib.import_module(f"{__name__}.{info.name}")
            except Exception:  # a broken module must not take the whole broker down
                log.exception("cannot load handler module %s", info.name)


_load_all()
