"""Settings, written once: the table every command, spec and service reads, and the runtime the
model families share.

- :data:`SETTINGS` (:mod:`evirank.config.settings`): each setting with its name, default, flag,
  help, group and check; :meth:`~evirank.config.table.SettingsTable.add_flags` makes a command's
  flags from it.
- :class:`Runtime` (:mod:`evirank.config.runtime`): device, engine, precision, batching, threads,
  score store and Ray, one frozen object a family's scorer takes.

Example:
    >>> from evirank.config import SETTINGS, Runtime
    >>> SETTINGS.default("k"), Runtime(device="cpu").device
    (1000, 'cpu')
"""

from __future__ import annotations

from evirank.config.runtime import BlockRunner, Runtime
from evirank.config.settings import SETTINGS
from evirank.config.table import Setting, SettingError, SettingsTable, is_flag, unknown_flag

__all__ = [
    "SETTINGS",
    "BlockRunner",
    "Runtime",
    "Setting",
    "SettingError",
    "SettingsTable",
    "is_flag",
    "unknown_flag",
]
