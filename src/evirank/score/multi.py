"""Several scorers over the same passages: ``--scorer cross:MODEL --scorer bi``.

A scorer is written ``[LABEL=]FAMILY[:MODEL]`` (:class:`ScorerSpec`), FAMILY one of the registered
model families (:mod:`evirank.score.family`) or ``auto`` (told from the model's files):
``cross:models/minilm-scifact``, ``bi`` (the offline all-MiniLM-L6-v2),
``bi:sentence-transformers/all-MiniLM-L6-v2``, ``seq2seq:castorini/monot5-base-msmarco``, or with a
label of its own, ``ce2=cross:models/other`` (the label defaults to the family; two scorers of one
family need labels). :class:`Scorers` runs each scorer on the passages (each through the score
store under its own fingerprint, a scorer with stored passage representations by lookup) and adds a
``score_<label>`` column per scorer; ``score`` is the first scorer's. The aggregator
(:class:`~evirank.aggregate.MultiEvidence`) combines them with one weight per scorer, written
``LABEL=W`` (:func:`parse_evidence_weights`).

Example:
    >>> ScorerSpec.parse("cross:models/minilm")
    ScorerSpec(label='cross', family='cross', model='models/minilm')
    >>> ScorerSpec.parse("bi").label, ScorerSpec.parse("b2=bi").label
    ('bi', 'b2')
    >>> parse_evidence_weights(["bi=0.3"])
    {'bi': 0.3}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import pandas as pd

from evirank.aggregate.evidence import EvidenceSpecError, check_labels, evidence_column
from evirank.config import Runtime
from evirank.frames import SCORE
from evirank.grammar import parse_spec
from evirank.segment.budget import passage_budget
from evirank.stage import Stage

logger = logging.getLogger(__name__)

#: How help texts and errors describe a scorer spec.
GRAMMAR = "[LABEL=]FAMILY[:MODEL]"


@dataclass(frozen=True)
class ScorerSpec:
    """One scorer: its label, model family and model (None: the family's default model).

    Example:
        >>> ScorerSpec.parse("ce=cross:/models/a:b")
        ScorerSpec(label='ce', family='cross', model='/models/a:b')
    """

    label: str
    family: str
    model: str | None = None

    @classmethod
    def parse(cls, text: str) -> ScorerSpec:
        """Parse ``[LABEL=]FAMILY[:MODEL]`` (the model may itself contain ``:``).

        ``auto:MODEL`` reads the family from the model's files (:func:`~evirank.score.family.detect_family`).

        Raises:
            EvidenceSpecError: an unknown family, a family that needs a model without one, a model
                whose family cannot be told, or a bad label.
        """
        from evirank.score.family import UnknownFamilyError, resolve_family

        parsed = parse_spec(
            text, what="scorer", labelled=True, tail=True, error=EvidenceSpecError, grammar=GRAMMAR
        )
        model = parsed.arg(0)
        try:
            family = resolve_family(parsed.name, model)
        except (UnknownFamilyError, OSError) as exc:  # OSError: a model folder that is not there
            raise EvidenceSpecError(f"scorer {text!r}: {exc}") from None
        label = parsed.label or default_label(family.name)
        check_labels([label])
        return cls(label, family.name, model)

    def __str__(self) -> str:
        return f"{self.label}={self.family}" + (f":{self.model}" if self.model else "")

    def build(self, runtime: Runtime | None = None, **options: Any) -> Any:
        """The scorer of this spec (:func:`~evirank.score.family.make_scorer`; options left None are
        the family's defaults)."""
        from evirank.score.family import make_scorer

        return make_scorer(self.family, self.model, runtime, **options)

    @property
    def stores_passages(self) -> bool:
        """Whether this scorer's passage representations can be stored at indexing time."""
        from evirank.score.family import get_family

        return get_family(self.family).stores_passages


def default_label(family: str) -> str:
    """The label of a scorer that names none: its family's name, in the letters a label holds
    (``duo-seq2seq`` is labelled ``duo_seq2seq``; its column is ``score_duo_seq2seq``).

    Example:
        >>> default_label("duo-seq2seq"), default_label("cross")
        ('duo_seq2seq', 'cross')
    """
    label = re.sub(r"[^a-z0-9_]", "_", family.lower())
    return label if label[:1].isalpha() else f"s_{label}"


def parse_scorers(texts: Iterable[str]) -> tuple[ScorerSpec, ...]:
    """Parse several scorers; their labels must differ.

    Raises:
        EvidenceSpecError: a bad spec, or two scorers with one label (give them ``LABEL=``).

    Example:
        >>> [s.label for s in parse_scorers(["cross:m", "bi"])]
        ['cross', 'bi']
    """
    specs = tuple(ScorerSpec.parse(text) for text in texts)
    labels = [s.label for s in specs]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise EvidenceSpecError(
            f"two scorers are labelled {', '.join(repeated)}; name them, e.g. ce1=cross:MODEL ce2=cross:OTHER"
        )
    return specs


def parse_evidence_weights(texts: Iterable[str] | str | None) -> dict[str, float]:
    """``LABEL=W`` pairs (separate strings, or one string separated by spaces or commas) as a dict.

    Raises:
        EvidenceSpecError: anything but ``LABEL=NUMBER`` pairs, or a label given twice.

    Example:
        >>> parse_evidence_weights("bi=0.3, ce2=0.2")
        {'bi': 0.3, 'ce2': 0.2}
    """
    if texts is None:
        return {}
    items = texts.replace(",", " ").split() if isinstance(texts, str) else list(texts)
    out: dict[str, float] = {}
    for item in items:
        label, sep, value = str(item).partition("=")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not sep or number != number:
            raise EvidenceSpecError(f"evidence weight {item!r}: expected LABEL=NUMBER, e.g. bi=0.3")
        label = label.strip()
        if label in out:
            raise EvidenceSpecError(f"evidence weight of {label!r} is given twice")
        out[label] = number
    return out


class Scorers(Stage):
    """Several scorers of the same passages: one ``score_<label>`` column each, ``score`` the first's.

    Args:
        scorers: ``(label, scorer)`` pairs in order (each a Stage that adds ``score``).

    Example:
        >>> class Length(Stage):
        ...     def transform(self, p):
        ...         return p.assign(score=p["text"].str.len().astype(float))
        >>> class Words(Stage):
        ...     def transform(self, p):
        ...         return p.assign(score=p["text"].str.split().str.len().astype(float))
        >>> p = pd.DataFrame({"qid": ["1"], "docno": ["a"], "pid": [0], "text": ["two words"]})
        >>> scored = Scorers([("chars", Length()), ("words", Words())])(p)
        >>> scored[["score", "score_chars", "score_words"]].values.tolist()
        [[9.0, 9.0, 2.0]]
    """

    def __init__(self, scorers: Sequence[tuple[str, Stage]]) -> None:
        pairs = [(str(label), scorer) for label, scorer in scorers]
        self.labels = check_labels([label for label, _ in pairs])
        self.scorers = tuple(scorer for _, scorer in pairs)

    def __repr__(self) -> str:
        return "Scorers(" + ", ".join(f"{label}={scorer!r}" for label, scorer in self.items()) + ")"

    def items(self) -> list[tuple[str, Stage]]:
        """``(label, scorer)`` pairs."""
        return list(zip(self.labels, self.scorers, strict=True))

    def transform(
        self, frame: pd.DataFrame, run: Callable[[Stage, pd.DataFrame], pd.DataFrame] | None = None
    ) -> pd.DataFrame:
        """Score ``frame`` with every scorer (``run(scorer, frame)``, default ``scorer(frame)``)."""
        call = run if run is not None else (lambda scorer, passages: scorer(passages))
        out = frame.copy()
        for label, scorer in self.items():
            scored = call(scorer, frame)
            if len(scored) != len(frame):
                raise ValueError(f"scorer {label} returned {len(scored)} rows for {len(frame)} passages")
            out[evidence_column(label)] = scored[SCORE].to_numpy()
        out[SCORE] = out[evidence_column(self.labels[0])]
        return out

    def passage_budget(self) -> tuple[Any, int]:
        """The tightest room for a passage among the scorers (so every scorer sees whole passages)."""

        budgets = [b for b in (passage_budget(s) for s in self.scorers) if b is not None]
        if not budgets:
            raise AttributeError("none of the scorers has a passage budget")
        return min(budgets, key=lambda b: b[1])

    @property
    def stats_(self) -> Any:
        """The scorers' counters summed (:class:`~evirank.score.transformer.ScoringStats`), or None."""
        from evirank.score.transformer import ScoringStats

        parts = [getattr(s, "stats_", None) for s in self.scorers]
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        total = ScoringStats()
        for name in (f.name for f in fields(ScoringStats)):
            setattr(total, name, sum(getattr(p, name) for p in parts))
        return total

    def fingerprints(self) -> dict[str, str | None]:
        """Each scorer's fingerprint by label (None for one without)."""
        out: dict[str, str | None] = {}
        for label, scorer in self.items():
            try:
                value = getattr(scorer, "fingerprint", None)
            except ValueError:
                value = None
            out[label] = None if value is None else str(value)
        return out

    def describe(self) -> dict[str, Any]:
        """Each scorer's description and fingerprint, by label."""
        fingerprints = self.fingerprints()
        out: dict[str, Any] = {}
        for label, scorer in self.items():
            describe = getattr(scorer, "describe", None)
            info = dict(describe()) if describe is not None else {"stage": repr(scorer)}
            out[label] = {**info, "fingerprint": fingerprints[label]}
        return {"scorers": out}
