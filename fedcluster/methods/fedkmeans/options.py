"""The settings of federated mini-batch k-means (Triebe & Rajagopal, paper ``003``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...options import LocalSteps, Momentum, RoundOptions, ServerLR


class FedKMeansOptions(RoundOptions):
    """The settings of ``fedkmeans``: server and client learning rates, batches, re-seeding."""

    algorithm: Literal["fedkmeans"] = "fedkmeans"
    lr: ServerLR
    momentum: Momentum
    local_steps: LocalSteps
    client_lr: float = Field(
        1.0, gt=0.0, le=1.0, description="client learning rate beta of mini-batch updates")
    batch_size: int = Field(
        0, ge=0, description="local mini-batch size B; 0 means the whole local set")
    reseed_fraction: float = Field(
        0.01, ge=0.0, lt=1.0, description="re-seed a cluster that holds less than this fraction "
        "of the mean cluster size (the round's points / k) for --reseed-patience consecutive "
        "rounds (0: never)")
    reseed_patience: int = Field(
        20, ge=1, description="consecutive small rounds before a cluster is re-seeded")
