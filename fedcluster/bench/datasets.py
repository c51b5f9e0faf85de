"""Datasets named in grid files, with generator parameters in the name.

``"garst-grid?points=200&noise=1.2"`` is the dataset ``garst-grid`` with those
parameters; values are read as integers, then floats, then text. The
parameters are part of the run's identity, so a changed value is a new run.

A generated dataset is drawn with the run's seed, so each seed of a grid sees
new data; ``data-seed=S`` fixes the draw instead (``"blobs?data-seed=0"``:
one dataset, while the split and the method still follow the run's seed, as
in the DWF paper's 100 runs on one synthetic set).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from ..data import DATASET_PARAMS, Dataset, load_dataset


def parse_spec(spec: str) -> tuple[str, dict[str, int | float | str]]:
    """Split ``"name?key=value&..."`` into the name and typed parameters."""
    name, _, query = spec.partition("?")
    params: dict[str, int | float | str] = {}
    for key, text in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
        params[key.replace("-", "_")] = _typed(text)
    return name, params


def load_spec(spec: str, *, seed: int) -> Dataset:
    """Load the dataset ``spec`` names, generated with ``seed`` (or its ``data-seed``)."""
    name, params = parse_spec(spec)
    params.pop("data_seed", None)
    return load_dataset(name, seed=data_seed(spec, seed), **params)


def data_seed(spec: str, seed: int) -> int:
    """The seed that decides the data ``spec`` names in a run with ``seed``.

    Its ``data-seed`` if it has one, else ``seed`` for a generated dataset,
    and 0 for fixed data (a shipped set or a file: any seed gives the same
    rows), so that runs over the same data can share one loaded copy.
    """
    name, params = parse_spec(spec)
    value = params.get("data_seed", seed)
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"dataset {spec!r}: data-seed must be a non-negative integer, "
                         f"got {value!r}")
    return value if name in DATASET_PARAMS else 0


def _typed(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
