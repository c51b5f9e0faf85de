"""scikit-learn's own estimator checks, run against FederatedKMeans where the federated contract allows.

``fit`` takes one array per data owner and refuses a single ``X``, which is
what every fitting check passes; :class:`OneOwner` hands that ``X`` over as
the one part of one owner, and all else is the estimator's own code. The
checks that do not apply are listed, with why, in the estimator's docstring
("scikit-learn's checks"); this file reads the list from there and runs it in
strict xfail mode, so the list can neither miss a failing check nor keep one
that passes.
"""

from __future__ import annotations

import re
import warnings

import pytest

pytest.importorskip("sklearn", minversion="1.8", reason="xfail_strict needs scikit-learn 1.8")
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from fedcluster import FederatedKMeans  # noqa: E402

DOCUMENTED = FederatedKMeans.__doc__.split("scikit-learn's checks")[1].split("Examples")[0]
NOT_APPLICABLE = {name: "does not apply: see FederatedKMeans's docstring"
                  for name in re.findall(r"``(check_\w+)``", DOCUMENTED)}


class OneOwner(FederatedKMeans):
    """FederatedKMeans as scikit-learn's checks call it: their ``X`` is one owner's part."""

    def fit(self, X, y=None):
        return super().fit([X])

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_[0]

    def fit_transform(self, X, y=None):
        return self.fit(X).transform(X)


def test_the_list_of_checks_that_do_not_apply_is_read():
    assert len(NOT_APPLICABLE) == 11 and "check_estimators_unfitted" in NOT_APPLICABLE


with warnings.catch_warnings():
    # fedcluster does not depend on scikit-learn, so the estimator is not a BaseEstimator.
    warnings.filterwarnings("ignore", "Estimator OneOwner does not inherit", UserWarning)
    CHECKS = parametrize_with_checks([OneOwner(3, max_iter=5)], xfail_strict=True,
                                     expected_failed_checks=lambda _: NOT_APPLICABLE)


@CHECKS
def test_scikit_learns_checks(estimator, check):
    check(estimator)
