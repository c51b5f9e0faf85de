"""Checks that turn arbitrary array-likes into a valid point matrix.

Every path by which points enter fedcluster (files, built-in datasets,
generated blobs, client data) ends in :func:`validate_points`, so a bad value
is reported once, near its source, instead of as a NaN centroid rounds later.

Values too large to compute with
--------------------------------
A value is refused when its magnitude exceeds :data:`MAX_ABS_VALUE` (1e100).
fedcluster computes squared distances and adds them up over rows, features and
clients (Lloyd steps, SSE, k-means++ weights, the server's totals). For values
within +-1e100, and centroids that are means of such values (so within the
same range), one squared difference is at most ``(2e100)**2 = 4e200``, and a
sum of ``n * d`` of them at most ``4e200 * n * d``: below the float64 maximum
(1.8e308) for up to 4e107 rows times features, that is for any data set that
can exist. Without the bound a single ``1e300`` makes its squared norm infinite
and the run "converges" to meaningless centroids. The bound does not depend on
a client's number of rows, so every client of a federation is held to the same
one, and it equals the largest magnitude the message protocol accepts
(``fedcluster.protocol.MAX_MAGNITUDE``), so a client's means always fit in its
replies. Rescale data beyond it (no real measurement comes near 1e100).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["MAX_ABS_VALUE", "DataError", "validate_points"]

#: Largest magnitude of a coordinate that :func:`validate_points` accepts (see
#: the module docstring): squared distances and their sums over any data set
#: stay finite in float64.
MAX_ABS_VALUE = 1e100


class DataError(ValueError):
    """Input data is missing, unreadable, or not a valid point matrix.

    The message starts with the data's source (a path or a description) so
    that a user with many client files knows which one to fix.
    """


def validate_points(
    X: ArrayLike,
    *,
    expected_dim: int | None = None,
    source: str = "data",
) -> np.ndarray:
    """Check a point matrix and return it as C-contiguous float64.

    Parameters
    ----------
    X : array_like
        Points, one per row, shape ``(n, d)``.
    expected_dim : int, optional
        Required number of features ``d``; not checked when ``None``.
    source : str, default "data"
        Where the points came from; every error message starts with it.

    Returns
    -------
    numpy.ndarray
        ``X`` as a C-contiguous ``float64`` array of shape ``(n, d)``; the input
        itself when it already is one, otherwise a copy.

    Raises
    ------
    DataError
        If ``X`` is not numeric (bool, object, strings, complex), not 2-D, has
        no rows or no columns, holds NaN or infinite values or values beyond
        +-:data:`MAX_ABS_VALUE` (the message names the first one's column and
        row, 0-based), or has a number of features other than ``expected_dim``.
    """
    if expected_dim is not None and expected_dim < 1:
        raise ValueError(f"expected_dim must be >= 1, got {expected_dim}")
    try:
        arr = np.asarray(X)
    except ValueError as exc:  # ragged nested sequences
        raise DataError(f"{source}: not a rectangular array ({exc})") from exc
    # Booleans and complex numbers are numbers to numpy but not coordinates.
    if arr.dtype.kind not in "iuf":
        raise DataError(
            f"{source}: expected numeric values, got dtype {arr.dtype}"
        )
    if arr.ndim != 2:
        hint = (
            "; reshape to (n, 1) for one feature or (1, d) for one point"
            if arr.ndim == 1
            else ""
        )
        raise DataError(
            f"{source}: expected a 2-D array (one point per row), "
            f"got shape {arr.shape}{hint}"
        )
    n, d = arr.shape
    if n == 0 or d == 0:
        raise DataError(f"{source}: no data (shape {arr.shape})")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    # Two reductions without temporaries; NaN fails the comparison too.
    if not -MAX_ABS_VALUE <= out.min() <= out.max() <= MAX_ABS_VALUE:
        _raise_bad_values(out, source)
    if expected_dim is not None and d != expected_dim:
        raise DataError(
            f"{source}: expected {expected_dim} features per point, got {d}"
        )
    return out


def _raise_bad_values(X: np.ndarray, source: str) -> None:
    """Name the non-finite values of ``X``, or else the first one beyond the bound."""
    bad = ~np.isfinite(X)
    if bad.any():
        first_row = int(np.argmax(bad.any(axis=1)))
        raise DataError(
            f"{source}: {int(bad.sum())} non-finite values "
            f"(first in row {first_row})"
        )
    large = np.abs(X) > MAX_ABS_VALUE
    row, column = divmod(int(np.argmax(large)), X.shape[1])
    count = int(large.sum())
    more = f"; {count} values exceed it" if count > 1 else ""
    raise DataError(
        f"{source}: value {X[row, column]:.6g} in column {column} (row {row}) is too large: "
        f"squared distances and their sums could overflow float64 "
        f"(|x| must be <= {MAX_ABS_VALUE:g}{more}; rescale the data)"
    )
