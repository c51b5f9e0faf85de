"""FFCM's settings (Stallmann & Wilbik, paper ``001``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...options import RoundOptions


class FFCMOptions(RoundOptions):
    """The settings of ``ffcm-avg1`` (eq. 8) and ``ffcm-avg2`` (eq. 9)."""

    algorithm: Literal["ffcm-avg1", "ffcm-avg2"] = "ffcm-avg1"
    fuzzifier: float = Field(2.0, gt=1.0, description="fuzzifier m of fuzzy c-means")
