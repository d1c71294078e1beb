"""Public collections on demand: find them on this machine, or download them into the data home.

``evirank data list`` shows what can be fetched and where each collection already is;
``evirank data get NAME`` prints its folder, downloading it first when needed.

Example:
    >>> from evirank.data import DATASETS, get_dataset
    >>> sorted(DATASETS)[:2]
    ['microblog-2011', 'microblog-2012']
    >>> folder = get_dataset("scifact")  # doctest: +SKIP
"""

from __future__ import annotations

from evirank.data.download import (
    DataFolderError,
    DownloadError,
    UnknownDatasetError,
    VerificationError,
    data_home,
    dataset,
    datasets_folder,
    describe,
    find_dataset,
    get_dataset,
    is_complete,
)
from evirank.data.registry import DATASETS, REGISTRY_ENV, Dataset, RemoteFile, load_registry, registry

__all__ = [
    "DATASETS",
    "REGISTRY_ENV",
    "DataFolderError",
    "Dataset",
    "DownloadError",
    "RemoteFile",
    "UnknownDatasetError",
    "VerificationError",
    "data_home",
    "dataset",
    "datasets_folder",
    "describe",
    "find_dataset",
    "get_dataset",
    "is_complete",
    "load_registry",
    "registry",
]
