"""The federated clustering methods fedcluster implements, by ``--algorithm`` name.

Each method is one folder here: its kernels, its client step, its server side
and a :class:`~.spec.Method` that declares it. :data:`METHODS` is the one
list of them; the configuration (which names are valid, which settings a
method records, and the strategy that runs each method:
:func:`fedcluster.config.build_strategy`), the command line (one help section
per method, with its paper) and the client's request kinds are derived from it. Adding a method is adding a folder and a line below.
"""

from __future__ import annotations

from .deepfeca import DEEPFECA
from .dwf import DWF, EWF
from .feca import FECA_METHOD
from .fedkmeans import FEDKMEANS
from .ffcm import AVG1, AVG2
from .fkm import FKM
from .kfed import KFED
from .mavg import MAVG
from ..options import Options, common_keys
from .spec import Method

METHODS: dict[str, Method] = {m.name: m for m in (
    DWF, EWF, FKM, KFED, AVG1, AVG2, FECA_METHOD, MAVG, FEDKMEANS, DEEPFECA,
)}

ALGORITHMS = tuple(METHODS)
#: The methods whose server per-cluster totals satisfy (:attr:`Method.sum_form`): the only
#: ones DP and secure aggregation run for.
SUM_FORMS = tuple(sorted(name for name, method in METHODS.items() if method.sum_form))
#: The methods DeepFeCA's step (a) may run (:attr:`Method.feature_clustering`).
FEATURE_CLUSTERINGS = tuple(sorted(name for name, method in METHODS.items()
                                   if method.feature_clustering))
# The settings' checks sit below the registry and cannot import it: it hands them these
# (every method's model is imported through this package, so it is set before any is used).
Options.sum_form_methods = SUM_FORMS
Options.feature_clusterings = FEATURE_CLUSTERINGS

#: Run-config keys of the settings every method takes (sampling, restarts, stopping,
#: clients' compute): the fields of :class:`fedcluster.options.Options`.
COMMON_OPTIONS = common_keys()


__all__ = ["ALGORITHMS", "COMMON_OPTIONS", "FEATURE_CLUSTERINGS", "METHODS", "Method", "SUM_FORMS"]
