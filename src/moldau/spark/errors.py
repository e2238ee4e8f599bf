"""The data source's option error (its own module so that ``options`` and ``valueformat`` share it)."""

from __future__ import annotations

__all__ = ["OptionError"]


class OptionError(ValueError):
    """An option this source does not accept, or a value it cannot use (the message names the option)."""
