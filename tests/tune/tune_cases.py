"""Constructed tuning cases whose best parameters are known (imported by the tune tests)."""

from __future__ import annotations

from evirank.tune.synthetic import PLANTED, planted_case

__all__ = ["PLANTED", "planted_case"]
