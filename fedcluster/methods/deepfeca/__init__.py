"""DeepFeCA: federated representation learning with FeCA pseudo-labels (Algorithm 6 of paper ``004``).

Needs PyTorch (``pip install "fedcluster[deep]"``), imported only when a
DeepFeCA run or request starts; the declaration below loads none of it.
"""

from __future__ import annotations

from ..spec import Method
from .client import DEEP_FEATURES, DEEP_TRAIN, features_request, train_request
from .options import DeepFeCAOptions

DEEPFECA = Method("deepfeca", "DeepFeCA, representation learning with FeCA pseudo-labels",
                  "Xu, Chen, Chao & Zhang, Jigsaw Game: Federated Clustering, section 5 "
                  "(papers/004)",
                  "fedcluster.methods.deepfeca.strategy:DeepFeCA", DeepFeCAOptions,
                  array_steps={DEEP_FEATURES: features_request, DEEP_TRAIN: train_request},
                  extra="deep")
