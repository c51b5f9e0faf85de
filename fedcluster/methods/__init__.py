"""The federated clustering methods fedcluster implements, by ``--algorithm`` name.

Each method is one folder here: its kernels, its client step, its server side
and a :class:`~.spec.Method` that declares it. :data:`METHODS` is the one
list of them; the configuration (which names are valid, which settings a
method records), the command line (one help section per method, with its
paper), the client's request kinds and the strategy that runs each method are
derived from it. Adding a method is adding a folder and a line below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .deepfeca import DEEPFECA
from .dwf import DWF, EWF
from .feca import FECA_METHOD
from .fedkmeans import FEDKMEANS
from .ffcm import AVG1, AVG2
from .fkm import FKM
from .kfed import KFED
from .mavg import MAVG
from ..options import common_keys
from .spec import Method

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..strategies import ClusteringStrategy

METHODS: dict[str, Method] = {m.name: m for m in (
    DWF, EWF, FKM, KFED, AVG1, AVG2, FECA_METHOD, MAVG, FEDKMEANS, DEEPFECA,
)}

ALGORITHMS = tuple(METHODS)

#: Run-config keys of the settings every method takes (sampling, restarts, stopping,
#: clients' compute): the fields of :class:`fedcluster.options.Options`.
COMMON_OPTIONS = common_keys()


def build_strategy(config: RunConfig) -> ClusteringStrategy:
    """The server side of ``config.algorithm``, with the configured settings."""
    return METHODS[config.algorithm].strategy.from_config(config)


__all__ = ["ALGORITHMS", "COMMON_OPTIONS", "METHODS", "Method", "build_strategy"]
