"""FKM's settings (Garst & Reinders, paper ``002``): only those of every method.

FKM starts from its own k-means++ round, so it takes no ``init`` and no
``k-prime``; the paper's privacy threshold p is ``min-cluster-size``.
"""

from __future__ import annotations

from typing import Literal

from ...options import Options


class FKMOptions(Options):
    """The settings of ``fkm``."""

    algorithm: Literal["fkm"] = "fkm"
