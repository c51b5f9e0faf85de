"""CIFAR-10 from its "python version" batches in a local directory (no download).

The archive ``cifar-10-python.tar.gz`` unpacks to ``cifar-10-batches-py/``,
whose files ``data_batch_1`` .. ``data_batch_5`` (training, 50 000 images)
and ``test_batch`` (10 000) are Python pickles of a dict with ``b"data"``, a
uint8 array of shape (n, 3072) (each row the 1024 red, then green, then blue
pixels of a 32x32 image, row-major) and ``b"labels"``, a list of n class
indices 0..9. :func:`load_cifar10` reads them as a :class:`Dataset` whose
rows are the images flattened in C,H,W order (DeepFeCA's ``--image-shape
3,32,32``), pixel values 0..255.

A pickle can run code when it is loaded; the reader here accepts only the
few NumPy names an array needs, and refuses a file that asks for anything
else.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from .datasets import Dataset
from .validation import DataError

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILES = ("test_batch",)
IMAGE_SHAPE = (3, 32, 32)
CITATION = ("A. Krizhevsky, Learning Multiple Layers of Features from Tiny Images, 2009 "
            "(CIFAR-10, python version, read from a local directory).")

#: The globals a pickled NumPy array refers to (NumPy 1 and 2 module names).
_ALLOWED = {("_codecs", "encode"),  # how Python 3 pickles bytes at protocol 2
            ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
            ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar")}


class _ArraysOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refused to load {module}.{name}")
        return super().find_class(module, name)


def read_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file: (images as uint8 rows of 3072 values, int64 labels).

    Raises
    ------
    DataError
        The file is missing, is not a CIFAR-10 python batch, or asks the
        unpickler for anything but a NumPy array.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            batch = _ArraysOnly(fh, encoding="bytes").load()
    except FileNotFoundError:
        raise DataError(f"{path}: no such CIFAR-10 batch file") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise DataError(f"{path}: not a CIFAR-10 python batch ({exc})") from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise DataError(f"{path}: not a CIFAR-10 python batch (no b'data' and b'labels')")
    data = np.asarray(batch[b"data"])
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != int(np.prod(IMAGE_SHAPE)):
        raise DataError(f"{path}: b'data' is {data.dtype} {data.shape}, expected uint8 (n, 3072)")
    if labels.shape != (len(data),) or (len(labels) and (labels.min() < 0 or labels.max() > 9)):
        raise DataError(f"{path}: b'labels' must be {len(data)} class indices 0..9")
    return data, labels


def load_cifar10(directory: str | Path, split: str = "train") -> Dataset:
    """The training (``split="train"``) or test images of ``cifar-10-batches-py/``.

    Rows are float64 pixel values 0..255 in C,H,W order; labels 0..9.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    directory = Path(directory)
    batches = [read_batch(directory / name) for name in (TRAIN_FILES if split == "train"
                                                         else TEST_FILES)]
    X = np.concatenate([data for data, _ in batches]).astype(np.float64)
    labels = np.concatenate([labels for _, labels in batches])
    return Dataset(f"cifar10-{split}:{directory}", X, labels, None, CITATION,
                   image_shape=IMAGE_SHAPE)
