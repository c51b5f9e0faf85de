"""DWF's and EWF's settings (Holzer, Jacob & Kavane, paper ``000``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...options import LocalSteps, Momentum, RoundOptions, ServerLR


class DWFOptions(RoundOptions):
    """The settings of ``dwf`` (weights: cluster sizes) and ``ewf`` (equal weights)."""

    algorithm: Literal["dwf", "ewf"] = "dwf"
    lr: ServerLR
    momentum: Momentum
    local_steps: LocalSteps
    max_client_share: float = Field(
        1.0, gt=0.0, le=1.0, description="dwf/ewf: largest share of a cluster's weight one client "
        "may hold (weights clipped by water-filling; 1: no cap); with fewer than 1/share clients "
        "holding a cluster, they get equal weights")
    aggregation: Literal["mean", "trimmed-mean", "median"] = Field(
        "mean", description="dwf/ewf: the paper's weighted mean, or a coordinate-wise trimmed mean "
        "or median of the local centroids over the clients holding each cluster (unweighted; "
        "bounds one client's influence)")
    trim_fraction: float = Field(
        0.2, ge=0.0, lt=0.5, description="share of a cluster's holders cut from each end by "
        "--aggregation trimmed-mean")
