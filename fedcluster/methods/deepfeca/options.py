"""DeepFeCA's settings (Algorithm 6 of Xu, Chen, Chao & Zhang, paper ``004``).

Step (a) of each round is a federated clustering of features by one of the
registered methods, so DeepFeCA takes the settings of the ones the paper
compares (FeCA's ``radius``, FFCM's ``fuzzifier`` and ``init``, everyone's
``k-prime``) from their own models, and adds those of the network and its
local training.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from ...options import LocalSteps
from ..feca.options import FeCAOptions
from ..ffcm.options import FFCMOptions

NETWORKS = ("small-cnn", "resnet18", "mlp")


def parse_shape(value: str) -> tuple[int, ...]:
    """``"C,H,W"`` (an image) or ``"D"`` (a vector, for the mlp) as a tuple of positive ints."""
    try:
        shape = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise ValueError(f"must be C,H,W or D with positive integers, got {value!r}") from None
    if len(shape) not in (1, 3) or min(shape) < 1:
        raise ValueError(f"must be C,H,W or D with positive integers, got {value!r}")
    return shape


def _shape(value: str) -> str:
    parse_shape(value)
    return value


class DeepFeCAOptions(FeCAOptions, FFCMOptions):
    """The settings of ``deepfeca``.

    ``num_server_rounds`` is T, ``local_steps`` the local epochs E of each
    round, ``k`` the number of pseudo-classes; the others are declared below.
    """

    algorithm: Literal["deepfeca"] = "deepfeca"
    local_steps: LocalSteps
    # Which methods may: those whose declaration says so (Method.feature_clustering; FeCA and
    # the baselines of the paper's Table 3), checked below and named as the run config's choices.
    feature_clustering: str = Field(
        "feca", description="DeepFeCA: the federated clustering of features in each round (FeCA, "
        "or the baselines of the paper's Table 3: ffcm-avg1, ffcm-avg2, kfed, mavg with one round)")
    network: Literal[NETWORKS] = Field(  # type: ignore[valid-type]
        "small-cnn", description="DeepFeCA: the feature extractor: small-cnn (trains on a CPU), "
        "resnet18 (the paper's, CIFAR variant), mlp (rows that are not images)")
    image_shape: Annotated[str, AfterValidator(_shape)] = Field(
        "1,28,28", description="DeepFeCA: C,H,W of each row read as an image (rows are images "
        "flattened in C,H,W order, as MNIST's and CIFAR's); D for the mlp",
        json_schema_extra={"allowed": "C,H,W or D, positive integers"})
    train_batch_size: int = Field(128, ge=2, description="DeepFeCA: mini-batch size B of local training")
    optimizer: Literal["sgd", "adam"] = Field(
        "sgd", description="DeepFeCA: local optimiser (sgd: momentum 0.9)")
    train_lr: float = Field(0.05, gt=0.0, le=10.0, description="DeepFeCA: local learning rate")
    weight_decay: float = Field(1e-4, ge=0.0, lt=1.0, description="DeepFeCA: local weight decay")
    augment: Literal["none", "shift", "shift-flip"] = Field(
        "shift", description="DeepFeCA: local augmentation: random shifts of up to H/8 pixels, "
        "and horizontal flips (natural images only)")
    head: Literal["linear", "centroids"] = Field(
        "linear", description="DeepFeCA: the classifier of the pseudo-labels: a linear layer "
        "drawn afresh each round (DeepCluster), or the fixed normalised centroids (DeepCluster-v2)")
    max_weight: float = Field(
        1e6, gt=0.0, description="DeepFeCA: largest magnitude of any weight a client may send back")

    @field_validator("feature_clustering")
    @classmethod
    def _declared_feature_clustering(cls, value: str) -> str:
        known = cls.feature_clusterings  # the registry's (Options.feature_clusterings)
        if known is not None and value not in known:
            raise ValueError(f"must be one of {', '.join(known)} (the methods that declare "
                             "feature_clustering)")
        return value
