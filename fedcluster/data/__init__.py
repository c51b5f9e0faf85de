"""fedcluster.data: datasets, point files and client partitions.

Nothing here depends on Flower, so data can be prepared, checked and split
on a machine without it.
"""

from fedcluster.data.atomic import atomic_write
from fedcluster.data.cifar import load_cifar10
from fedcluster.data.datasets import (
    DATASET_NAMES,
    DATASET_PARAMS,
    G2_NAMES,
    NOISE_LABEL,
    BlobsParams,
    Dataset,
    FFCMCase1Params,
    GarstGridParams,
    TriebeParams,
    load_dataset,
    make_blobs,
    make_ffcm_case1,
    make_garst_grid,
    make_triebe,
)
from fedcluster.data.files import read_labelled, read_points, write_points
from fedcluster.data.partition import (
    MANIFEST_NAME,
    SPLIT_FORMS,
    SPLIT_HELP,
    Split,
    parse_split,
    partition_file,
    partition_indices,
    write_partitions,
)
from fedcluster.data.validation import DataError, validate_points

__all__ = [
    "DATASET_NAMES",
    "DATASET_PARAMS",
    "G2_NAMES",
    "MANIFEST_NAME",
    "NOISE_LABEL",
    "SPLIT_FORMS",
    "SPLIT_HELP",
    "BlobsParams",
    "DataError",
    "Dataset",
    "FFCMCase1Params",
    "GarstGridParams",
    "Split",
    "TriebeParams",
    "atomic_write",
    "load_cifar10",
    "load_dataset",
    "make_blobs",
    "make_ffcm_case1",
    "make_garst_grid",
    "make_triebe",
    "parse_split",
    "partition_file",
    "partition_indices",
    "read_labelled",
    "read_points",
    "validate_points",
    "write_partitions",
    "write_points",
]
