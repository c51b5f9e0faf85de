"""Reading and writing point files (``.npy``, ``.npz``, ``.csv``, ``.txt``).

Formats
-------
``.npy``
    One 2-D numeric array; no labels.
``.npz``
    Points under ``X`` (or the only array that is neither a label nor a
    centre array); labels, if any, under ``y`` or ``labels``
    (:data:`NPZ_LABEL_KEYS`); true centres, if any, under ``centers`` or
    ``centres`` (:data:`NPZ_CENTER_KEYS`), shape ``(k, d)`` with ``d`` the
    columns of ``X`` (checked).
``.csv``
    Comma-separated with a header row. One column may hold labels, the
    *label column*; every other column is a feature and must be numeric.
``.txt`` (read only)
    Whitespace-separated numbers without a header, as the SIPU benchmark files.

The label column of a CSV file
------------------------------
``label_column="NAME"``
    The column ``NAME`` holds the labels and is not a feature; a name that
    is not in the header is an error listing the header's columns.
``label_column=None`` (the default)
    A column named exactly ``label`` (:data:`LABEL_COLUMN`, what
    :func:`write_points` writes) holds the labels, if there is one. Any
    *other* column whose name looks like labels (:data:`LABEL_LIKE_NAMES`,
    any case: ``labels``, ``class``, ``target``, ``y``, ``Label``, ...) is an
    error that says how to choose, rather than being read silently as a
    feature; ``y`` counts as a coordinate, not labels, when the header also
    has an ``x`` column (``x,y`` points). A non-numeric column that is not
    the label column is an error that says how to name it as the label column.
``label_column=""`` (:data:`NO_LABEL_COLUMN`)
    No label column: every column is a feature, whatever its name.

Labels are integers; a label column whose cells are not all numbers is read
as class names, coded ``0, 1, ...`` in the sorted order of the distinct names
(an empty cell is an error). ``label_column`` applies to CSV files only: an
``.npz`` file holds its labels in ``y``.

Every array read passes through :func:`~fedcluster.data.validation.validate_points`
and every problem is raised as :class:`~fedcluster.data.validation.DataError`
naming the file.
"""

from __future__ import annotations

import csv
import os
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from fedcluster.data.atomic import atomic_write
from fedcluster.data.validation import DataError, validate_points

__all__ = [
    "LABEL_COLUMN",
    "LABEL_LIKE_NAMES",
    "NO_LABEL_COLUMN",
    "NPZ_CENTER_KEYS",
    "NPZ_LABEL_KEYS",
    "READABLE_SUFFIXES",
    "WRITABLE_SUFFIXES",
    "FileData",
    "output_suffix",
    "read_file",
    "read_labelled",
    "read_points",
    "write_points",
]

PathLike = str | os.PathLike[str]

READABLE_SUFFIXES = (".npy", ".npz", ".csv", ".txt")
WRITABLE_SUFFIXES = (".npy", ".npz", ".csv")
#: Names under which an ``.npz`` file may hold labels, in order of preference.
NPZ_LABEL_KEYS = ("y", "labels")
#: Names under which an ``.npz`` file may hold its true centres, in order of preference.
NPZ_CENTER_KEYS = ("centers", "centres")
#: Header of the label column that :func:`write_points` writes and that the
#: readers treat as labels, not as a feature, when no other column is named.
LABEL_COLUMN = "label"
#: ``label_column`` value meaning: no label column, every CSV column is a feature.
NO_LABEL_COLUMN = ""
#: CSV column names (compared in lower case) that look like labels: with no
#: label column named, such a column other than ``label`` is an error, not a
#: feature (``y`` only when the header has no ``x`` column).
LABEL_LIKE_NAMES = (
    "label", "labels", "class", "classes", "target", "targets", "y", "cluster", "category",
)


class FileData(NamedTuple):
    """What a data file holds: points and, where the file has them, ground truth.

    Attributes
    ----------
    X : numpy.ndarray
        C-contiguous ``float64`` points, shape ``(n, d)``.
    labels : numpy.ndarray or None
        ``int64`` labels, shape ``(n,)``.
    centers : numpy.ndarray or None
        ``float64`` true centres, shape ``(k, d)`` (``.npz`` only).
    """

    X: np.ndarray
    labels: np.ndarray | None
    centers: np.ndarray | None


#: Unvalidated points, labels and centres as a reader returns them.
_Raw = tuple[np.ndarray, np.ndarray | None, np.ndarray | None]


def read_points(path: PathLike, *, label_column: str | None = None) -> np.ndarray:
    """Read a point matrix from a file, ignoring any labels and centres it holds.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy``, ``.npz``, ``.csv`` or ``.txt`` file (see the module
        docstring). A CSV column named ``label`` is not read as a feature.
    label_column : str, optional
        CSV only: the label column, left out of the points (see the module
        docstring; ``""`` reads every column as a feature).

    Returns
    -------
    numpy.ndarray
        C-contiguous ``float64`` array of shape ``(n, d)``.

    Raises
    ------
    DataError
        If the file is missing, has an unsupported extension, cannot be
        parsed, or does not hold a valid point matrix.
    """
    return read_file(path, label_column=label_column).X


def read_labelled(
    path: PathLike, *, label_column: str | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Read points and, where the file has them, integer labels.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy``, ``.npz``, ``.csv`` or ``.txt`` file.
    label_column : str, optional
        CSV only: the column holding the labels; all other columns are
        features. By default a column named ``label`` is used if present
        (see the module docstring).

    Returns
    -------
    X : numpy.ndarray
        C-contiguous ``float64`` array of shape ``(n, d)``.
    labels : numpy.ndarray or None
        ``int64`` array of shape ``(n,)``, or ``None`` when the file has none
        (always for ``.npy`` and ``.txt``).

    Raises
    ------
    DataError
        As :func:`read_file`.
    """
    X, labels, _ = read_file(path, label_column=label_column)
    return X, labels


def read_file(path: PathLike, *, label_column: str | None = None) -> FileData:
    """Read points, labels and true centres, each where the file has them.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy``, ``.npz``, ``.csv`` or ``.txt`` file (see the module
        docstring).
    label_column : str, optional
        CSV only: ``"NAME"`` (that column holds the labels), ``None`` (the
        ``label`` convention) or ``""`` (no labels); see the module docstring.

    Returns
    -------
    FileData
        The points; the labels (``.npz`` ``y``, or a CSV label column) or
        ``None``; the true centres (``.npz`` ``centers``) or ``None``.

    Raises
    ------
    DataError
        If the file is missing, has an unsupported extension, cannot be
        parsed, or does not hold a valid point matrix; if the labels are not
        integers or do not match the number of points; if the centres are not
        a finite ``(k, d)`` array; if ``label_column`` is not in the header,
        is given for a file that is not CSV, or is not given while a column
        looks like labels.
    """
    path = Path(path)
    if label_column is not None and path.suffix.lower() != ".csv":
        raise DataError(
            f"{path}: label_column ({label_column!r}) applies to .csv files only; an .npz file "
            f"holds its labels in an array 'y'"
        )
    X, labels, centers = _read_raw(path, label_column=label_column)
    X = validate_points(X, source=str(path))
    y = None if labels is None else _as_labels(labels, len(X), source=str(path))
    c = None if centers is None else _as_centers(centers, X.shape[1], source=str(path))
    return FileData(X, y, c)


def output_suffix(path: PathLike, *, with_labels: bool = False) -> str:
    """Return the lower-case suffix of a file to be written, checking it.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write.
    with_labels : bool, default False
        Whether labels will be written too.

    Returns
    -------
    str
        One of :data:`WRITABLE_SUFFIXES`.

    Raises
    ------
    DataError
        If the extension cannot be written, or cannot hold labels.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in WRITABLE_SUFFIXES:
        raise DataError(
            f"{path}: cannot write {suffix or 'files without an extension'}; "
            f"use one of {', '.join(WRITABLE_SUFFIXES)}"
        )
    if with_labels and suffix == ".npy":
        raise DataError(f"{path}: .npy holds points only; use .npz or .csv for labels")
    return suffix


def write_points(
    path: PathLike, X: ArrayLike, labels: ArrayLike | None = None
) -> Path:
    """Write points (and optionally labels) atomically, format from the extension.

    ``.npy`` stores the points only; ``.npz`` stores ``X`` and, if given,
    ``y``; ``.csv`` has the header ``x0,x1,...`` plus a ``label`` column if
    labels are given. Values are written exactly (shortest round-trip float
    text in CSV). The file is replaced atomically, so a reader never sees a
    partial file.

    Parameters
    ----------
    path : str or os.PathLike
        Target file; its directory must exist.
    X : array_like
        Points, shape ``(n, d)``.
    labels : array_like, optional
        Integer labels, shape ``(n,)``.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    DataError
        If the extension is not writable, ``labels`` are given for ``.npy``,
        or ``X`` or ``labels`` are invalid.
    """
    path = Path(path)
    suffix = output_suffix(path, with_labels=labels is not None)
    X = validate_points(X, source=f"points for {path}")
    y = None if labels is None else _as_labels(labels, len(X), source=f"labels for {path}")
    mode = "w" if suffix == ".csv" else "wb"
    with atomic_write(path, mode) as fh:
        _WRITERS[suffix](fh, X, y)
    return path


# -- reading ------------------------------------------------------------------


def _read_raw(path: Path, *, label_column: str | None) -> _Raw:
    """Dispatch on the extension; return unvalidated points and labels."""
    suffix = path.suffix.lower()
    if suffix not in _READERS:
        raise DataError(
            f"{path}: unsupported file type {suffix or '(no extension)'}; "
            f"use one of {', '.join(READABLE_SUFFIXES)}"
        )
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    try:
        return _READERS[suffix](path, label_column)
    except DataError:
        raise
    # Each numpy reader signals malformed content with a different type.
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"{path}: cannot read {suffix} file ({exc})") from exc


def _read_npy(path: Path, label_column: str | None) -> _Raw:
    # allow_pickle=False: a data file must never be able to run code.
    arr = np.load(path, allow_pickle=False)
    if isinstance(arr, np.lib.npyio.NpzFile):
        arr.close()
        raise DataError(f"{path}: holds an .npz archive, not a single .npy array")
    return arr, None, None


def _read_npz(path: Path, label_column: str | None) -> _Raw:
    archive = np.load(path, allow_pickle=False)
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DataError(f"{path}: holds a single array, not an .npz archive")
    with archive:
        names = list(archive.files)
        if "X" in names:
            x_name = "X"
        else:
            candidates = [n for n in names if n not in NPZ_LABEL_KEYS + NPZ_CENTER_KEYS]
            if len(candidates) != 1:
                raise DataError(
                    f"{path}: no array named 'X' and {len(candidates)} other "
                    f"arrays ({', '.join(candidates) or 'none'}); store the points as 'X'"
                )
            x_name = candidates[0]
        label_names = [n for n in NPZ_LABEL_KEYS if n in names]
        if len(label_names) > 1:
            raise DataError(
                f"{path}: both 'y' and 'labels' present; keep one label array"
            )
        labels = archive[label_names[0]] if label_names else None
        center_names = [n for n in NPZ_CENTER_KEYS if n in names]
        if len(center_names) > 1:
            raise DataError(
                f"{path}: both 'centers' and 'centres' present; keep one centre array"
            )
        centers = archive[center_names[0]] if center_names else None
        return archive[x_name], labels, centers


def _read_txt(path: Path, label_column: str | None) -> _Raw:
    with warnings.catch_warnings():
        # An empty file is reported as "no data" by validate_points instead.
        warnings.simplefilter("ignore", UserWarning)
        return np.loadtxt(path, dtype=np.float64, ndmin=2), None, None


def _read_csv(path: Path, label_column: str | None) -> _Raw:
    # utf-8-sig: spreadsheet programs often prepend a byte-order mark.
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path}: empty file (expected a header row)")
        names = [h.strip() for h in header]
        rows: list[list[str]] = []
        lines: list[int] = []  # file line of each row, for error messages
        for row in reader:
            if not row:  # blank line
                continue
            if len(row) != len(names):
                raise DataError(
                    f"{path}: line {reader.line_num} has {len(row)} fields, "
                    f"the header has {len(names)}"
                )
            rows.append(row)
            lines.append(reader.line_num)
    _check_header(path, names)
    label_at = _label_index(path, names, label_column)
    table = np.array(rows, dtype=str).reshape(len(rows), len(names))
    features = [_csv_column(path, table, j, names[j], lines)
                for j in range(len(names)) if j != label_at]
    if not features:
        raise DataError(f"{path}: no feature columns besides the label column")
    labels = None if label_at is None else _csv_labels(path, table, label_at, names, lines)
    return np.column_stack(features), labels, None


def _label_index(path: Path, names: list[str], label_column: str | None) -> int | None:
    """The index of the label column (``None``: no labels), by the rules of the module docstring."""
    if label_column == NO_LABEL_COLUMN:
        return None
    if label_column is not None:
        name = label_column.strip()
        if name not in names:
            raise DataError(
                f"{path}: no column {name!r} (columns: {', '.join(names)}); "
                f"the label column must be one of the header's columns"
            )
        return names.index(name)
    label_at = names.index(LABEL_COLUMN) if LABEL_COLUMN in names else None
    lower = [n.lower() for n in names]
    suspects = [n for j, n in enumerate(names)
                if j != label_at and lower[j] in LABEL_LIKE_NAMES
                and not (lower[j] == "y" and "x" in lower)]
    if suspects:
        name = suspects[0]
        also = (f" (also {', '.join(map(repr, suspects[1:]))})" if len(suspects) > 1 else "")
        using = (f"column {LABEL_COLUMN!r} holds the labels, so " if label_at is not None
                 else "no label column was named, so ")
        raise DataError(
            f"{path}: column {name!r}{also} looks like labels, but {using}it would be read as a "
            f"feature; name the label column (label_column={name!r}; on the command line "
            f"--label-column {name}), or pass label_column='' (--label-column '') to read every "
            f"column as a feature"
        )
    return label_at
def _check_header(path: Path, names: list[str]) -> None:
    """Reject a missing header (numbers on line 1) and duplicate column names."""
    if all(_is_number(n) for n in names):
        raise DataError(
            f"{path}: line 1 holds numbers, but a header row of column names is required"
        )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DataError(f"{path}: duplicate column names: {', '.join(duplicates)}")


def _csv_column(
    path: Path, table: np.ndarray, j: int, name: str, lines: list[int]
) -> np.ndarray:
    """Convert column ``j`` to float64, naming the first non-numeric cell."""
    column = table[:, j]
    try:
        return column.astype(np.float64)
    except ValueError:
        pass
    # Slow path, only to locate the offending cell for the message.
    cells = column.tolist()
    bad = next((i for i, cell in enumerate(cells) if not _is_number(cell)), None)
    where = "" if bad is None else f" (line {lines[bad]}: {cells[bad]!r})"
    raise DataError(
        f"{path}: column {name!r} is not numeric{where}; every column but the label column is a "
        f"feature and must hold numbers: if {name!r} holds labels, name it as the label column "
        f"(label_column={name!r}; on the command line --label-column {name})"
    )


def _csv_labels(
    path: Path, table: np.ndarray, j: int, names: list[str], lines: list[int]
) -> np.ndarray:
    """Column ``j`` as labels: numbers as they are, else names coded in sorted order."""
    column = table[:, j]
    try:
        return column.astype(np.float64)  # checked to be integers by _as_labels
    except ValueError:
        pass
    cells = np.char.strip(column)
    empty = np.flatnonzero(cells == "")
    if len(empty):
        raise DataError(
            f"{path}: label column {names[j]!r} has an empty cell (line {lines[empty[0]]})"
        )
    _, codes = np.unique(cells, return_inverse=True)
    return codes.reshape(-1).astype(np.int64)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_READERS: dict[str, Callable[[Path, str | None], _Raw]] = {
    ".npy": _read_npy,
    ".npz": _read_npz,
    ".csv": _read_csv,
    ".txt": _read_txt,
}


# -- labels and centres ---------------------------------------------------------


def _as_labels(labels: ArrayLike, n: int, *, source: str) -> np.ndarray:
    """Return labels as int64 of shape ``(n,)``; integral floats are accepted."""
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != n:
        raise DataError(f"{source}: expected {n} labels in a 1-D array, got shape {y.shape}")
    if y.dtype.kind in "iu":
        return y.astype(np.int64)
    # CSV columns arrive as float; accept them when they hold whole numbers.
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        return y.astype(np.int64)
    raise DataError(
        f"{source}: labels must be integers (got dtype {y.dtype} with non-integer values)"
    )


def _as_centers(centers: ArrayLike, d: int, *, source: str) -> np.ndarray:
    """Return true centres as float64 of shape ``(k, d)``, checked."""
    c = np.asarray(centers)
    if c.ndim != 2 or c.shape[0] < 1 or c.shape[1] != d:
        raise DataError(
            f"{source}: the true centres must have shape (k, {d}), one centre per row with "
            f"as many columns as the points; got shape {c.shape}"
        )
    return validate_points(c, expected_dim=d, source=f"{source}: true centres")


# -- writing --------------------------------------------------------------------


def _write_npy(fh: IO[Any], X: np.ndarray, y: np.ndarray | None) -> None:
    np.save(fh, X)


def _write_npz(fh: IO[Any], X: np.ndarray, y: np.ndarray | None) -> None:
    arrays = {"X": X} if y is None else {"X": X, "y": y}
    np.savez(fh, **arrays)


def _write_csv(fh: IO[Any], X: np.ndarray, y: np.ndarray | None) -> None:
    header = [f"x{j}" for j in range(X.shape[1])]
    # csv writes floats with repr(), the shortest text that reads back exactly.
    rows: list[list[Any]] = X.tolist()
    if y is not None:
        header.append(LABEL_COLUMN)
        rows = [[*row, label] for row, label in zip(rows, y.tolist(), strict=True)]
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)


_WRITERS: dict[str, Callable[[IO[Any], np.ndarray, np.ndarray | None], None]] = {
    ".npy": _write_npy,
    ".npz": _write_npz,
    ".csv": _write_csv,
}
