"""Where a ClientApp finds its local rows.

In order of precedence:

1. ``node_config["data-path"]``: a deployment's SuperNode names its own file
   (``.npy``, ``.npz``, ``.csv`` with a header, ``.txt``).
2. ``partitions-dir`` in the run config and ``node_config["partition-id"]``: the
   files written by ``fedcluster partition`` (simulation over prepared splits).
3. ``dataset``, ``split`` and ``seed`` in the run config with
   ``node_config["partition-id"]`` and ``["num-partitions"]``: every simulated
   client partitions the same dataset the same way and keeps its own part.

Loaded arrays are cached per process and device (NumPy or CuPy, whatever
``device`` string chose it): the rows are read, checked and moved to a GPU
once per run, not once per round, and only the small results of a step leave
the device. The cache holds each source this process serves once per device,
so its memory is the data's, whatever the number of (simulated) clients: a
process that serves many clients of a simulation holds their parts, which
together are one copy of the dataset. A file that changes (modification time
or size) is read again and replaces its entry.

:func:`forget` drops the cached arrays of given sources (:func:`cached_sources`
lists them). Clients that are arrays in the server's process (the library,
the benchmark runner) need none of this: see
:class:`fedcluster.client.memory.InMemoryFederation`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..data import DataError, load_dataset, partition_file, partition_indices, read_points
from ..numerics import get_namespace

DATA_PATH_KEY = "data-path"
PARTITION_ID_KEY = "partition-id"
NUM_PARTITIONS_KEY = "num-partitions"


def local_data(node_config: Mapping[str, Any], settings: Mapping[str, Any], device: str):
    """Return this client's rows on ``device`` (validated, float64).

    Raises
    ------
    DataError
        No source is configured, or the source is unreadable or invalid.
    """
    key, stamp, load = _source(node_config, settings)
    xp = get_namespace(device)
    entry = (key, xp.__name__)
    with _LOCK:
        cached = _CACHE.get(entry)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    X = xp.asarray(load())
    with _LOCK:
        _CACHE[entry] = (stamp, X)
    return X


def clear_cache() -> None:
    """Forget every cached array (the next request reads its source again)."""
    with _LOCK:
        _CACHE.clear()
    _split.cache_clear()


def cached_sources() -> list[tuple]:
    """The source keys (``("file", path)``, ...) with a cached array."""
    with _LOCK:
        return list(dict.fromkeys(key for key, _ in _CACHE))


def forget(sources: Iterable[tuple]) -> int:
    """Drop the cached arrays of ``sources`` (keys as :func:`cached_sources` lists them), on every
    device; return how many arrays were dropped."""
    wanted = set(sources)
    with _LOCK:
        gone = [entry for entry in _CACHE if entry[0] in wanted]
        for entry in gone:
            del _CACHE[entry]
    return len(gone)


#: (source key, array module name) -> (stamp, rows on that device).
_CACHE: dict[tuple, tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def _source(node_config: Mapping[str, Any], settings: Mapping[str, Any]
            ) -> tuple[tuple, Any, Callable[[], np.ndarray]]:
    """``(key, stamp, load)``: what identifies the rows, their version, and how to read them."""
    if DATA_PATH_KEY in node_config:
        path = Path(str(node_config[DATA_PATH_KEY])).expanduser().resolve()
        return ("file", str(path)), _stamp(path), lambda: read_points(path)
    if PARTITION_ID_KEY not in node_config:
        raise DataError(
            f"no local data: set node_config '{DATA_PATH_KEY}' (flower-supernode "
            f"--node-config '{DATA_PATH_KEY}=\"/path/to/data.npy\"')"
        )
    partition_id = int(node_config[PARTITION_ID_KEY])
    partitions_dir = str(settings.get("partitions-dir", ""))
    if partitions_dir:
        path = partition_file(partitions_dir, partition_id)
        return ("file", str(path)), _stamp(path), lambda: read_points(path)
    if NUM_PARTITIONS_KEY not in node_config:
        raise DataError(f"node_config has '{PARTITION_ID_KEY}' but no '{NUM_PARTITIONS_KEY}'")
    split = (
        str(settings.get("dataset", "s1")),
        str(settings.get("split", "iid")),
        int(settings.get("seed", 0)),
        int(node_config[NUM_PARTITIONS_KEY]),
    )
    if not 0 <= partition_id < split[3]:
        raise DataError(f"partition-id {partition_id} is outside 0..{split[3] - 1}")

    def load() -> np.ndarray:
        X, parts = _split(*split)
        return X[parts[partition_id]]

    return ("split", *split, partition_id), None, load


def _stamp(path: Path) -> tuple[int, int]:
    """Modification time and size, so that a replaced file is read again."""
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise DataError(f"client data {path}: cannot read ({exc.strerror})") from None
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=2)
def _split(dataset: str, split: str, seed: int, num_partitions: int):
    """The dataset and its partition, computed once per process for all its simulated clients."""
    data = load_dataset(dataset, seed=seed)
    parts = partition_indices(data.X.shape[0], num_partitions, split, labels=data.labels,
                              points=data.X, seed=seed)
    return data.X, parts
