"""registry.SERVED (what ApiVersions advertises, and where each API's handler module is) against the handler
modules themselves: a module is imported only on the first request of its API, so the table must name every
``kNN_*.py`` module with the versions its ``@handler`` registers."""

from __future__ import annotations

import pkgutil
import re

import pytest

import moldau.broker.handlers as handlers_pkg
from moldau.broker import registry


def test_every_handler_module_is_served_under_its_key() -> None:
    modules = {int(m.group(1)): info.name for info in pkgutil.iter_modules(handlers_pkg.__path__)
               if (m := re.fullmatch(r"k(\d\d)_\w+", info.name))}
    assert {key: entry[0] for key, entry in registry.SERVED.items()} == modules


def test_loaded_handlers_register_exactly_what_is_served() -> None:
    loaded = registry.load_all()
    assert {k: (s.min_version, s.max_version) for k, s in loaded.items()} == \
        {k: (lo, hi) for k, (_module, lo, hi) in registry.SERVED.items()}
    for key, spec in loaded.items():
        assert spec.fn.__module__ == f"moldau.broker.handlers.{registry.SERVED[key][0]}"
        assert registry.load_handler(key) is spec  # loaded once, then the registry's entry


def test_registration_must_match_the_table() -> None:
    with pytest.raises(ValueError, match="SERVED lists 0-13"):
        registry.handler(api_key=0, min_version=0, max_version=14)
    with pytest.raises(ValueError, match="not in moldau.broker.registry.SERVED"):
        registry.handler(api_key=1000, min_version=0, max_version=0)


def test_unknown_api_key_has_no_handler() -> None:
    assert registry.load_handler(1000) is None
    assert registry.load_handler(-1) is None
