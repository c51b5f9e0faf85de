"""fedcluster.data: datasets, point files and client partitions.

Nothing here depends on Flower, so data can be prepared, checked and split
on a machine without it. The public names load their module on first use:
a ClientApp process, which reads one partition file per message, does not
pay for the data sets' generators and loaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .atomic import atomic_write
    from .cifar import load_cifar10
    from .datasets import (DATASET_NAMES, DATASET_PARAMS, G2_NAMES, NOISE_LABEL, BlobsParams,
                           Dataset, FFCMCase1Params, GarstGridParams, GoogleSyntheticParams,
                           TriebeParams, load_dataset, make_blobs, make_ffcm_case1,
                           make_garst_grid, make_google_synthetic, make_triebe)
    from .files import read_labelled, read_points, write_points
    from .partition import (MANIFEST_NAME, SPLIT_FORMS, SPLIT_HELP, Split, parse_split,
                            partition_file, partition_indices, write_partitions)
    from .validation import DataError, validate_points

#: Module -> the public names it defines.
_MODULES = {
    ".atomic": ("atomic_write",),
    ".cifar": ("load_cifar10",),
    ".datasets": ("DATASET_NAMES", "DATASET_PARAMS", "G2_NAMES", "NOISE_LABEL", "BlobsParams",
                  "Dataset", "FFCMCase1Params", "GarstGridParams", "GoogleSyntheticParams",
                  "TriebeParams", "load_dataset", "make_blobs", "make_ffcm_case1",
                  "make_garst_grid", "make_google_synthetic", "make_triebe"),
    ".files": ("read_labelled", "read_points", "write_points"),
    ".partition": ("MANIFEST_NAME", "SPLIT_FORMS", "SPLIT_HELP", "Split", "parse_split",
                   "partition_file", "partition_indices", "write_partitions"),
    ".validation": ("DataError", "validate_points"),
}
_MODULE_OF = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_MODULE_OF)


__getattr__ = lazy_names(__name__, _MODULE_OF, globals())
