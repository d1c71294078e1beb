"""The built-in model families, one module each; :mod:`evirank.score.family` finds them by listing
this package, so a new family is a new module here that calls
:func:`~evirank.score.family.register_family` (see docs/architecture.md)."""
