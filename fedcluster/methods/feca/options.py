"""FeCA's settings (Xu, Chen, Chao & Zhang, paper ``004``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...options import KPrime, Options
from .kernels import RadiusRule


class FeCAOptions(Options):
    """The settings of ``feca``: the clients' local k' and the radius rule."""

    algorithm: Literal["feca"] = "feca"
    k_prime: KPrime
    radius: RadiusRule = Field(
        "algorithm4", description="FeCA's radius rule: Algorithm 4 (empirical) or Algorithm 3")
