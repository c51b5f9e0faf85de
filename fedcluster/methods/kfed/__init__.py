"""k-FED: one-shot farthest-point clustering of local centres (Dennis, Li & Smith, ICML 2021).

The clients answer the shared local k-means request; the server's step is
:func:`fedcluster.numerics.kfed.kfed_centres`, which DWF's ``--init kfed`` uses too.
"""

from __future__ import annotations

from ..spec import Method
from .options import KFedOptions

KFED = Method("kfed", "k-FED, one-shot farthest-point clustering of local centres",
              "Dennis, Li & Smith, Heterogeneity for the Win, ICML 2021",
              "fedcluster.methods.kfed.strategy:KFed", KFedOptions, feature_clustering=True)
