"""k-FED's settings (Dennis, Li & Smith, ICML 2021)."""

from __future__ import annotations

from typing import Literal

from ...options import KPrime, Options


class KFedOptions(Options):
    """The settings of ``kfed``: the clients' local k' besides those of every method."""

    algorithm: Literal["kfed"] = "kfed"
    k_prime: KPrime
