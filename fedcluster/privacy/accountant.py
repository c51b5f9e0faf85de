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
* **Setup steps** before the rounds: the bounds step (:mod:`.bounds`, a DP
  run without ``data-bounds``) and the private start (:mod:`.start`), each
  one Gaussian mechanism of its own multiplier, composed before the rounds
  (``first`` below: their one combined multiplier, ``(sum 1 / z^2)^(-1/2)``,
  exact for Gaussians). A step's share ``s`` of the budget
  (``dp-bounds-share``, ``dp-start-share``) is a share of the privacy loss
  ``1 / z^2`` that Gaussian mechanisms add up (zCDP's ``rho``): with ``z_1``
  the multiplier of one mechanism that spends the whole budget, the step's
  is ``z_1 / sqrt(s)`` and the rounds' multiplier is calibrated to what is
  left.
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
def epsilon_spent(noise_multiplier: float, rounds: int, delta: float, first: float = 0.0) -> float:
    """Epsilon at ``delta`` after ``rounds`` Gaussian mechanisms of ``noise_multiplier`` (PLD),
    and before them one of multiplier ``first`` (the bounds step; 0: none)."""
    if rounds == 0 and not first:
        return 0.0
    if noise_multiplier == 0 and rounds:
        return math.inf
    dp_accounting, pld = _library()
    accountant = pld.PLDAccountant(value_discretization_interval=VALUE_DISCRETIZATION)
    if first:
        accountant.compose(dp_accounting.GaussianDpEvent(first))
    if rounds:
        accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier), rounds)
    return float(accountant.get_epsilon(delta))


def analytic_epsilon(noise_multiplier: float, rounds: int, delta: float, first: float = 0.0
                     ) -> float:
    """Epsilon at ``delta`` of ``rounds`` Gaussian mechanisms of ``noise_multiplier`` (and one of
    ``first``, 0: none), in closed form.

    Gaussian mechanisms compose to one whose ``1 / z^2`` is the sum of
    theirs: the analytic Gaussian mechanism (Balle & Wang 2018) of multiplier
    ``(rounds / z^2 + 1 / first^2)^(-1/2)`` is exact for this composition and
    cheap whatever its value; the pessimistic accountant
    (:func:`epsilon_spent`) never reports less, beyond about 1e-6.
    """
    if rounds == 0 and not first:
        return 0.0
    if noise_multiplier == 0 and rounds:
        return math.inf
    loss = (rounds / noise_multiplier ** 2 if rounds else 0.0) + (1 / first ** 2 if first else 0.0)
    dp_accounting, _ = _library()
    return float(dp_accounting.get_epsilon_gaussian(1 / math.sqrt(loss), delta))


def fits(noise_multiplier: float, rounds: int, delta: float, epsilon: float, first: float = 0.0
         ) -> bool:
    """Whether ``rounds`` rounds of ``noise_multiplier`` (after one of ``first``) spend at most
    ``epsilon`` at ``delta``.

    The accountant decides, unless the analytic epsilon alone exceeds
    ``epsilon`` (by more than the two may differ): an epsilon far above any
    budget would cost it gigabytes.
    """
    if analytic_epsilon(noise_multiplier, rounds, delta, first) > epsilon + 1e-3:
        return False
    return epsilon_spent(noise_multiplier, rounds, delta, first) <= epsilon


def calibrate(epsilon: float, delta: float, rounds: int, first: float = 0.0) -> float:
    """The smallest noise multiplier whose ``rounds`` rounds (after one mechanism of multiplier
    ``first``, 0: none) spend at most ``epsilon`` at ``delta``."""
    if not (epsilon > 0 and 0 < delta < 1 and rounds >= 1) or \
            analytic_epsilon(1.0, 0, delta, first) >= epsilon:
        raise ValueError(f"calibrate needs epsilon > 0, 0 < delta < 1, rounds >= 1 and a first "
                         f"mechanism that leaves some budget; got {epsilon!r}, {delta!r}, "
                         f"{rounds!r}, {first!r}")
    low, high = 1e-3, 1.0
    while analytic_epsilon(high, rounds, delta, first) > epsilon:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if analytic_epsilon(middle, rounds, delta, first) > epsilon \
            else (low, middle)
    # The accountant rounds pessimistically: raise z a hair until it agrees.
    while epsilon_spent(high, rounds, delta, first) > epsilon:
        high *= 1.0001
    return high


def split(epsilon: float, delta: float, rounds: int, shares: dict[str, float]
          ) -> tuple[dict[str, float], float]:
    """Each setup step's multiplier for its share of the budget (``z_1 / sqrt(share)``), and
    the rounds' multiplier calibrated to the rest (see the module docstring)."""
    whole = calibrate(epsilon, delta, 1)
    setup = {name: whole / math.sqrt(share) for name, share in shares.items()}
    return setup, calibrate(epsilon, delta, rounds, combined(setup.values()))


#: Rounds of a calibrated DP run chosen from epsilon (``dp-rounds = 0``): at least
#: ``LEAST_AUTO_ROUNDS``, at most ``MOST_AUTO_ROUNDS``; after the private start, one.
LEAST_AUTO_ROUNDS = 2
MOST_AUTO_ROUNDS = 5
ROUNDS_AFTER_PRIVATE_START = 1


def rounds_for(epsilon: float, private_start: bool = False) -> int:
    """The rounds a calibrated DP run spreads its budget over when the user does not say.

    From a data-blind start (``random``, ``spread``, an ``--init`` file):
    ``5 + 2 log2(epsilon)`` between 2 and 5: 5 from epsilon 1 on, 3 at 0.5,
    2 from about 0.35 down. A Lloyd step's noise grows with the square root
    of the rounds, so a small budget affords fewer steps (FastLloyd chooses
    2-7 rounds from epsilon the same way). Measured on S1 from the former
    counts-only start and estimated bounds (``BENCHMARKS.md``, "The start and
    the bounds under DP"): at epsilon 0.5, 3 rounds 2.82 x the centralized
    score, 5 rounds 3.43 x; at epsilon 5, 5 rounds 1.07 x, 10 rounds 1.10 x.

    After the private start (``private_start``, :mod:`.start`):
    :data:`ROUNDS_AFTER_PRIVATE_START` at every epsilon. That start is
    already k-means run to convergence, by the server, over the DP coreset,
    so the rounds do not cluster but refine: the first replaces each centre
    by the noisy mean of all the rows nearest it (a whole cluster's count
    against the noise, where the coreset's cells held pieces of clusters),
    and each further round moves the centres little while the noise of
    every round grows with the square root of their number. Measured
    (``BENCHMARKS.md``, same sections), 1 / 2 / 5 rounds, central: S1
    1.23 / 1.31 / 1.64 x at epsilon 1, 1.68 / 2.37 / - at 0.5, 1.05 / 1.08 /
    1.21 at 2, 1.01 / 1.02 / 1.05 at 5; Google's synthetic set, ``k`` = 64:
    fewer rounds better at ``k`` = 16, 32 and 64.
    """
    if private_start:
        return ROUNDS_AFTER_PRIVATE_START
    wanted = round(MOST_AUTO_ROUNDS + 2 * math.log2(epsilon))
    return int(min(MOST_AUTO_ROUNDS, max(LEAST_AUTO_ROUNDS, wanted)))


class Budget:
    """What a DP run may spend and what it has spent.

    Parameters
    ----------
    epsilon, delta : float
        The user's budget (``dp-epsilon``, ``dp-delta``).
    noise_multiplier : float
        ``z`` of every round.
    setup : dict of str to float
        The one-off Gaussian mechanisms before the rounds, by name
        (``bounds``: the bounds step, ``start``: the private start), and their
        multipliers; their share is reserved from the start.
    """

    def __init__(self, epsilon: float, delta: float, noise_multiplier: float,
                 setup: dict[str, float] | None = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.noise_multiplier = noise_multiplier
        self.setup = dict(setup or {})
        #: Rounds released so far.
        self.rounds = 0
        #: The setup steps released so far, in order.
        self.released: list[str] = []

    @property
    def setup_multiplier(self) -> float:
        """The one multiplier of all setup steps together (0: none)."""
        return combined(self.setup.values())

    @property
    def spent(self) -> float:
        """Epsilon spent by the setup steps and the rounds released so far (at ``delta``)."""
        return epsilon_spent(self.noise_multiplier, self.rounds, self.delta,
                             combined(self.setup[name] for name in self.released))

    def allows_another_round(self) -> bool:
        """Whether one more round keeps the spent epsilon within the budget (every setup step
        counted whether or not it ran yet)."""
        return fits(self.noise_multiplier, self.rounds + 1, self.delta, self.epsilon,
                    self.setup_multiplier)

    def spend_setup(self, name: str) -> float:
        """Count the release of the setup step ``name``; return the epsilon spent so far."""
        self.released.append(name)
        return self.spent

    def spend(self) -> float:
        """Count one released round; return the epsilon spent so far."""
        self.rounds += 1
        return self.spent


def combined(multipliers) -> float:
    """The multiplier of Gaussian mechanisms composed: ``(sum 1 / z^2)^(-1/2)``; 0 for none."""
    loss = sum(1 / z ** 2 for z in multipliers)
    return 1 / math.sqrt(loss) if loss else 0.0
