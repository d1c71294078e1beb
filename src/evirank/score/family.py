"""Model families: one registry of the kinds of model that can score a (query, passage).

A family is a plug-in: one module under :mod:`evirank.score.families` (or a third-party module named
by an ``evirank.families`` entry point) that builds a :class:`Family` and passes it to
:func:`register_family`. The family says how its scorer is made (its scorer class: how it loads a
model, formats inputs, turns outputs into one relevance score per input), which backends it runs
on, whether a passage's representation can be computed once at indexing time, which training
recipe it has (by name), and how to recognise its models from their files. Everything else (the score
store and fingerprints, batching, devices, Ray, the cascade, serve, explain, tune) is generic and
reads only this record and the public :class:`Scorer` protocol.

Built-in families are found by listing :mod:`evirank.score.families`, so adding one is adding a
module there; nothing heavy is imported until a family is asked for.

Example:
    >>> "cross" in family_names()
    True
    >>> get_family("cross").name
    'cross'
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from evirank.config import Runtime
from evirank.errors import UsageError

logger = logging.getLogger(__name__)

#: The entry-point group through which other packages add families.
ENTRY_POINT_GROUP = "evirank.families"
#: The pseudo-family that asks for detection from the model's files.
AUTO = "auto"


class UnknownFamilyError(UsageError, ValueError):
    """A family name that no module registered, or a model whose family cannot be told."""


@runtime_checkable
class Scorer(Protocol):
    """What every family's scorer offers; generic code uses nothing else.

    A scorer is a Stage: ``transform(passages)`` adds ``score`` to a Passages frame
    [qid, query, docno, pid, text]. ``fingerprint`` names the model files and every setting
    that changes a score (the score store's key), ``describe()`` says it in words,
    ``passage_budget()`` gives (tokenizer, tokens a passage may fill), ``settings()`` the
    settings hashed into the fingerprint, ``load()`` loads the model (so errors show before
    long work), and ``compute_block(columns, stats)`` runs the model on one block of items (the
    columns named by ``block_columns``): the hook that Ray actors call.
    """

    family: str
    block_columns: tuple[str, ...]

    def transform(self, frame: pd.DataFrame) -> pd.DataFrame: ...

    @property
    def fingerprint(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def settings(self) -> dict[str, Any]: ...

    def passage_budget(self) -> tuple[Any, int]: ...

    def load(self) -> Any: ...

    def compute_block(self, columns: Mapping[str, list[str]], stats: Any) -> Any: ...


@dataclass(frozen=True)
class ModelInfo:
    """What a model's files say about it, read without loading weights.

    Attributes:
        config: the parsed ``config.json`` (empty when absent).
        modules: the module types of a sentence-transformers folder (``modules.json``), in order.
        files: the names of the folder's files.
        path: the folder (None for a description built in memory).

    Example:
        >>> ModelInfo({"architectures": ["BertForSequenceClassification"]}).architectures
        ('BertForSequenceClassification',)
    """

    config: Mapping[str, Any] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    path: Path | None = None

    @property
    def architectures(self) -> tuple[str, ...]:
        """The model classes ``config.json`` names (``architectures``)."""
        return tuple(str(a) for a in (self.config.get("architectures") or ()))

    def has_architecture(self, suffix: str) -> bool:
        """Whether an architecture name ends with ``suffix`` (``"ForCausalLM"``)."""
        return any(a.endswith(suffix) for a in self.architectures)

    @classmethod
    def read(cls, model_dir: str | os.PathLike[str]) -> ModelInfo:
        """Read ``config.json`` and ``modules.json`` of a local model folder."""
        folder = Path(model_dir)
        config: dict[str, Any] = {}
        if (folder / "config.json").is_file():
            config = _read_json(folder / "config.json")
        modules: tuple[str, ...] = ()
        if (folder / "modules.json").is_file():
            listed = _read_json(folder / "modules.json")
            if isinstance(listed, list):
                modules = tuple(str(m.get("type", "")) for m in listed if isinstance(m, dict))
        files = tuple(sorted(p.name for p in folder.iterdir())) if folder.is_dir() else ()
        return cls(config, modules, files, folder)


def _read_json(path: Path) -> Any:
    from evirank.errors import InputFormatError

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputFormatError(path, None, "a JSON file", f"one that cannot be read ({exc})") from exc


@dataclass(frozen=True)
class Family:
    """One kind of model, as the registry knows it.

    Attributes:
        name: the family's name, as written in specs (``--scorer NAME``, ``NAME:MODEL``).
        scorer: the scorer class (or factory): ``scorer(model, runtime, **options)`` gives a
            :class:`Scorer` (``runtime``: a :class:`~evirank.config.Runtime`; ``options``: the
            family's own).
        summary: one line for listings and help texts.
        claims: how strongly the family recognises a model from its files (0: not at all;
            higher wins; a tie between families is ambiguous and asks for ``--scorer``).
        backends: the backends (:mod:`evirank.score.backends`) it runs on.
        needs_model: whether a model must be named (False: the scorer has a default model).
        stores_passages: whether a passage's representation can be computed once at indexing time
            and stored beside the index (bi-encoder vectors, late-interaction token vectors).
        recipe: how ``evirank train`` fine-tunes the family's models, named as ``"module:factory"``
            (a :class:`evirank.train.recipe.Recipe` factory, imported only when training; None: not
            trainable). The family names it and :mod:`evirank.train` looks it up, so scoring never
            imports training code.
        pairwise: whether the model compares two passages for a query (a ``Duo`` stage's model)
            instead of scoring one.
        scale: what its score is (:data:`evirank.score.relevance.SCALES`: ``log-odds``,
            ``log-probability``, ``cosine``, ``maxsim``), so services can report it in [0, 1].
        document_score: whether its scorer also writes one score per document computed from all
            its passages (the ``document_score`` column ``--aggregate document`` reads; PARADE).

    Example:
        >>> Family("demo", scorer=dict, summary="a demo").backends
        ('torch',)
    """

    name: str
    scorer: Callable[..., Any]
    summary: str
    claims: Callable[[ModelInfo], int] = lambda info: 0
    backends: tuple[str, ...] = ("torch",)
    needs_model: bool = True
    stores_passages: bool = False
    recipe: str | None = None
    pairwise: bool = False
    scale: str = "log-odds"
    document_score: bool = False


_FAMILIES: dict[str, Family] = {}
_discovered = False


#: What a family's name may hold: it is written in specs (``NAME:MODEL``, ``LABEL=NAME``) and looked up
#: in any case, so it is kept in lower case.
_FAMILY_NAME = re.compile(r"^[a-z][a-z0-9_.+-]*$")


def family_key(name: str) -> str:
    """The registry's spelling of a family name: stripped, lower case (what specs are read as).

    Example:
        >>> family_key(" Duo-Seq2Seq ")
        'duo-seq2seq'
    """
    return str(name).strip().lower()


def register_family(family: Family) -> Family:
    """Make ``family`` available by its name (a module registers its family when imported).

    The name is kept in lower case, the spelling :func:`get_family` looks up (``My-Family`` is
    registered, listed and found as ``my-family``); the family returned carries that spelling.

    Raises:
        ValueError: another family already has that name (in any case), or a name that a spec
            could not hold (empty, blanks, ``:`` or ``=``).
    """
    key = family_key(family.name)
    if not _FAMILY_NAME.match(key):
        raise ValueError(
            f"a model family's name must start with a letter and hold letters, digits, _ . + or -, "
            f"found {family.name!r}"
        )
    if key != family.name:
        family = replace(family, name=key)
    known = _FAMILIES.get(key)
    if known is not None and known.scorer is not family.scorer:
        raise ValueError(f"two model families are named {key!r}")
    _FAMILIES[key] = family
    return family


def _discover() -> None:
    """Import every module of :mod:`evirank.score.families` and every entry point (once)."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module("evirank.score.families")
    for module in pkgutil.iter_modules(package.__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{module.name}")
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
        except Exception as exc:  # a broken third-party plug-in must not break the built-ins
            logger.warning("model family plug-in %s could not be loaded: %s", point.name, exc)
            continue
        if isinstance(loaded, Family):
            register_family(loaded)


def family_names() -> list[str]:
    """The names of every registered family, sorted.

    Example:
        >>> "cross" in family_names() and "bi" in family_names()
        True
    """
    _discover()
    return sorted(_FAMILIES)


def get_family(name: str) -> Family:
    """The family registered as ``name``.

    Raises:
        UnknownFamilyError: naming the registered families.
    """
    _discover()
    try:
        return _FAMILIES[family_key(name)]
    except KeyError:
        raise UnknownFamilyError(
            f"unknown model family {name!r}; expected one of {', '.join(family_names())} "
            f"(or {AUTO}: told from the model's files)"
        ) from None


def detect_family(model: str | os.PathLike[str] | ModelInfo) -> Family:
    """The family whose claim on ``model``'s files is strongest.

    ``*ForSequenceClassification`` reads as a cross-encoder, ``T5ForConditionalGeneration`` as
    seq2seq, ``*ForCausalLM`` as a yes/no LLM, and a sentence-transformers folder as a bi-encoder
    or a late-interaction model by its modules. A Hub id is resolved to a local snapshot first.

    Raises:
        UnknownFamilyError: no family recognises the model, or two recognise it equally.

    Example:
        >>> detect_family(ModelInfo({"architectures": ["BertForSequenceClassification"]})).name
        'cross'
    """
    if isinstance(model, ModelInfo):
        info = model
    else:
        from evirank.score.fingerprint import resolve_model_dir

        info = ModelInfo.read(resolve_model_dir(model))
    _discover()
    scored = sorted(((family.claims(info), name) for name, family in _FAMILIES.items()), reverse=True)
    where = str(info.path) if info.path is not None else "the model"
    if not scored or scored[0][0] <= 0:
        raise UnknownFamilyError(
            f"{where}: no model family recognises this model (architectures: "
            f"{', '.join(info.architectures) or 'none'}); say which with --scorer "
            f"{{{','.join(family_names())}}}"
        )
    best = [name for claim, name in scored if claim == scored[0][0]]
    if len(best) > 1:
        raise UnknownFamilyError(
            f"{where}: the model could be read as {' or '.join(sorted(best))}; say which with --scorer"
        )
    return _FAMILIES[best[0]]


def resolve_family(name: str | None, model: str | os.PathLike[str] | None) -> Family:
    """The family ``name`` names, or (``None``/``"auto"``) the one detected from ``model``.

    Without a model, ``auto`` is the default bi-encoder's family.

    Raises:
        UnknownFamilyError: an unknown name, an undetectable model, or a family that needs a model
            given none.

    Example:
        >>> resolve_family("auto", None).name
        'bi'
    """
    if name is None or str(name).strip().lower() == AUTO:
        family = detect_family(model) if model is not None else get_family("bi")
    else:
        family = get_family(name)
    if family.needs_model and model is None:
        raise UnknownFamilyError(
            f"the {family.name} family needs its model (a Hugging Face id or a local folder): give --model, "
            f"or {family.name}:MODEL in a scorer spec"
        )
    return family


def make_scorer(
    family: str | Family | None,
    model: str | os.PathLike[str] | None,
    runtime: Runtime | None = None,
    **options: Any,
) -> Scorer:
    """Build the scorer of ``family`` (a name, ``auto``/None to detect) for ``model``.

    ``runtime`` is where and how it runs (:class:`~evirank.config.Runtime`; None: the defaults);
    ``options`` are the family's own keyword arguments (an LLM's ``instruction``, a bi-encoder's
    ``vectors``); those left at ``None`` are not passed, so each family keeps its own defaults.

    Raises:
        UnknownFamilyError: as :func:`resolve_family`, or a backend the family does not run on.

    Example:
        >>> from evirank.config import Runtime
        >>> make_scorer("bi", None, Runtime(device="cpu")).family
        'bi'
    """
    chosen = family if isinstance(family, Family) else resolve_family(family, model)
    runtime = Runtime() if runtime is None else runtime
    if runtime.backend not in chosen.backends:
        raise UnknownFamilyError(
            f"the {chosen.name} family runs on the {', '.join(chosen.backends)} backend"
            f"{'s' if len(chosen.backends) > 1 else ''}, not {runtime.backend!r}"
        )
    given = {key: value for key, value in options.items() if value is not None}
    unknown = sorted(set(given) - set(family_options(chosen)))
    if unknown and not _takes_any_keyword(chosen.scorer):
        from evirank.errors import ArgumentError

        known = ", ".join(family_options(chosen)) or "none"
        raise ArgumentError(
            f"{', '.join(unknown)}: not an option of the {chosen.name} family (its options: {known}; "
            "the runtime's settings: device, backend, dtype, batch_tokens, max_length, model_threads, "
            "commit_every)"
        )
    scorer: Scorer = chosen.scorer(model, runtime, **given)
    return scorer


def family_options(family: Family) -> list[str]:
    """The keyword arguments a family's scorer takes besides the model and the runtime.

    Example:
        >>> "query_prefix" in family_options(get_family("bi"))
        True
    """
    import inspect

    parameters = inspect.signature(family.scorer.__init__).parameters
    return [
        name
        for name, parameter in parameters.items()
        if name not in ("self", "model", "runtime")
        and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
    ]


def _takes_any_keyword(cls: Any) -> bool:
    import inspect

    parameters = inspect.signature(cls.__init__).parameters.values()
    return any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters)


def family_of(scorer: Any) -> Family:
    """The registered family of a scorer object.

    Example:
        >>> family_of(make_scorer("bi", None)).stores_passages
        True
    """
    return get_family(scorer.family)
