"""The privacy budget of a run: Gaussian-mechanism rounds counted by a maintained accountant.

Every DP round releases the noisy (sums, w counts) of one Gaussian mechanism
with the same noise multiplier ``z = sigma / Delta``
(:mod:`fedcluster.privacy.mechanism`). :class:`Budget` counts them with
Google's ``dp-accounting`` privacy loss distribution accountant (the library
behind Flower's ``flwr[dp]`` extra; ``pip install "fedcluster[dp]"``), which is
tight for the Gaussian mechanism, and answers what ``(epsilon, delta)`` the
rounds so far have spent and whether one more round fits the budget.

Choices left open elsewhere, as made here:

* **No amplification by sampling**: with ``participation < 1`` a round still
  counts as a full Gaussian mechanism over every client's rows (a client's
  rows may be in any round's sample; claiming amplification would need
  Poisson sampling of rows, which the federation does not do).
* **Calibration**: with ``dp-noise-multiplier = 0`` the multiplier is the
  smallest one whose ``num-server-rounds`` rounds spend at most ``dp-epsilon``
  at ``dp-delta`` (a run with that many rounds uses its budget exactly);
  ``T`` Gaussian mechanisms of multiplier ``z`` compose to one of multiplier
  ``z / sqrt(T)``, so the search runs on the analytic Gaussian mechanism
  (Balle & Wang 2018) and the accountant confirms the result. A fixed
  multiplier instead runs until the next round would exceed ``dp-epsilon``.
* **Discretisation** of the accountant: value interval 1e-3, pessimistic (it
  never reports less than the true epsilon); its epsilon matches the analytic
  composition to about 1e-6.
* **Bounded cost**: the accountant's time and memory grow with the epsilon it
  computes (calibrating epsilon 100 takes about 2 s and 80 MB, 1000 a minute,
  10^6 19.6 GB), so ``dp-epsilon`` is at most 100
  (:data:`~.options.MAX_EPSILON`) and no epsilon above the budget is ever
  computed exactly: where the closed-form analytic epsilon
  (:func:`analytic_epsilon`) already exceeds it, that answers (a round that
  does not fit, a client's refusal).
"""

from __future__ import annotations

import math
from functools import lru_cache

#: The accountant's discretisation of the privacy loss (pessimistic rounding).
VALUE_DISCRETIZATION = 1e-3


def _library():
    try:
        import dp_accounting
        from dp_accounting import pld
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("differential privacy (dp = central or distributed) needs the "
                          "dp-accounting package: pip install 'fedcluster[dp]'") from None
    return dp_accounting, pld


@lru_cache(maxsize=4096)
def epsilon_spent(noise_multiplier: float, rounds: int, delta: float) -> float:
    """Epsilon at ``delta`` after ``rounds`` Gaussian mechanisms of ``noise_multiplier`` (PLD)."""
    if rounds == 0:
        return 0.0
    if noise_multiplier == 0:
        return math.inf
    dp_accounting, pld = _library()
    accountant = pld.PLDAccountant(value_discretization_interval=VALUE_DISCRETIZATION)
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier), rounds)
    return float(accountant.get_epsilon(delta))


def analytic_epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
    """Epsilon at ``delta`` of ``rounds`` Gaussian mechanisms of ``noise_multiplier``, in closed form.

    The analytic Gaussian mechanism (Balle & Wang 2018) of multiplier
    ``z / sqrt(rounds)``: exact for this composition and cheap whatever its
    value; the pessimistic accountant (:func:`epsilon_spent`) never reports
    less, beyond about 1e-6.
    """
    if rounds == 0:
        return 0.0
    if noise_multiplier == 0:
        return math.inf
    dp_accounting, _ = _library()
    return float(dp_accounting.get_epsilon_gaussian(noise_multiplier / math.sqrt(rounds), delta))


def fits(noise_multiplier: float, rounds: int, delta: float, epsilon: float) -> bool:
    """Whether ``rounds`` rounds of ``noise_multiplier`` spend at most ``epsilon`` at ``delta``.

    The accountant decides, unless the analytic epsilon alone exceeds
    ``epsilon`` (by more than the two may differ): an epsilon far above any
    budget would cost it gigabytes.
    """
    if analytic_epsilon(noise_multiplier, rounds, delta) > epsilon + 1e-3:
        return False
    return epsilon_spent(noise_multiplier, rounds, delta) <= epsilon


def calibrate(epsilon: float, delta: float, rounds: int) -> float:
    """The smallest noise multiplier whose ``rounds`` rounds spend at most ``epsilon`` at ``delta``."""
    if not (epsilon > 0 and 0 < delta < 1 and rounds >= 1):
        raise ValueError(f"calibrate needs epsilon > 0, 0 < delta < 1, rounds >= 1; got "
                         f"{epsilon!r}, {delta!r}, {rounds!r}")
    low, high = 1e-3, 1.0
    while analytic_epsilon(high, rounds, delta) > epsilon:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if analytic_epsilon(middle, rounds, delta) > epsilon \
            else (low, middle)
    # The accountant rounds pessimistically: raise z a hair until it agrees.
    while epsilon_spent(high, rounds, delta) > epsilon:
        high *= 1.0001
    return high


class Budget:
    """What a DP run may spend and what it has spent.

    Parameters
    ----------
    epsilon, delta : float
        The user's budget (``dp-epsilon``, ``dp-delta``).
    noise_multiplier : float
        ``z`` of every round.
    """

    def __init__(self, epsilon: float, delta: float, noise_multiplier: float) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        #: Rounds released so far.
        self.rounds = 0

    @property
    def spent(self) -> float:
        """Epsilon spent by the rounds released so far (at ``delta``)."""
        return epsilon_spent(self.noise_multiplier, self.rounds, self.delta)

    def allows_another_round(self) -> bool:
        """Whether one more round keeps the spent epsilon within the budget."""
        return fits(self.noise_multiplier, self.rounds + 1, self.delta, self.epsilon)

    def spend(self) -> float:
        """Count one released round; return the epsilon spent so far."""
        self.rounds += 1
        return self.spent
