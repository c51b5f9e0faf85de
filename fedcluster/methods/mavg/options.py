"""M-Avg's settings (the baseline of Xu et al., paper ``004``)."""

from __future__ import annotations

from typing import Literal

from ...options import KPrime, Options


class MAvgOptions(Options):
    """The settings of ``mavg``: the clients' local k' besides those of every method."""

    algorithm: Literal["mavg"] = "mavg"
    k_prime: KPrime
