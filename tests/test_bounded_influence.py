"""Bounded influence of one client on DWF / EWF (issue "Careless and hostile clients").

The options ``max-client-share`` and ``aggregation`` (trimmed mean, median) and
the spread warning, through the real clients and the strategy (in-memory federation).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from helpers import altered_replies, iid_parts, messages

from fedcluster.config import ConfigError, RunConfig
from fedcluster.client.memory import InMemoryFederation
from fedcluster.config import build_strategy
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans
from fedcluster.metrics import centre_distance

#: One S1 row near each true centre (the honest start of tests/test_weighted_mean.py).
START_ROWS = [4, 400, 700, 1000, 1400, 1700, 2000, 2400, 2700, 3000, 3400, 3700, 4000, 4400, 4700]
WARNING_TAIL = "x the median of the other clients': is its data in other units?"


#: The lie of ``benchmarks/poisoning.py``: rows, counts and distances x1000 in every
#: reply; round centroids moved by SHIFT (``shift``) or sent at FAR (``far``).
INFLATE = 1000
SHIFT = 3e4
FAR = 1e7


def lying_client(mode):
    """The real client, whose replies lie as ``lying_app`` of ``benchmarks/poisoning.py`` does.

    Every reply declares ``INFLATE`` times its rows, counts and squared distances;
    a round's (``train``) centroids are moved by ``SHIFT`` (``shift``) or all sent
    at ``FAR`` (``far``); ``counts`` leaves them honest. (The benchmark's ClientApp
    itself wraps Flower messages, which an in-memory client does not send.)
    """

    def change(summary, request, node_config):
        lie = {"n": summary.n * INFLATE}
        if not math.isnan(summary.sse):
            lie["sse"] = summary.sse * INFLATE
        if summary.counts is not None:
            lie["counts"] = summary.counts * INFLATE
        if request.kind.startswith("train") and summary.centroids is not None:
            if mode == "shift":
                lie["centroids"] = summary.centroids + SHIFT
            elif mode == "far":
                lie["centroids"] = np.full_like(summary.centroids, FAR)
        return dataclasses.replace(summary, **lie)

    return altered_replies(change)


# -- hand case through the strategy ----------------------------------------------------

def one_cluster(tmp_path, **kwargs):
    """k = 1; clients A = {0, 2}, B = {3, 5}, C = {100, 101, 105}; start 10; lr 0.5.

    C is far on purpose, to tell the options apart: ``trust-clients`` keeps the default's
    far-reply check from rejecting it (see test_robust_defaults.py).
    """
    parts = [np.array([[0.0], [2.0]]), np.array([[3.0], [5.0]]),
             np.array([[100.0], [101.0], [105.0]])]
    np.save(tmp_path / "start.npy", np.array([[10.0]]))
    strategy = WeightedFederatedKMeans(1, init=str(tmp_path / "start.npy"), tol=0.0,
                                       lr=0.5, trust_clients=True, **kwargs)
    return strategy.fit(InMemoryFederation(parts)).centroids[0, 0]


@pytest.mark.parametrize(("options", "aggregate"), [
    # DWF's weighted mean: counts (2, 2, 3) and local centroids (1, 4, 102).
    ({}, (2 * 1 + 2 * 4 + 3 * 102) / 7),
    # Cap 0.4: C's 3 of 7 is clipped to tau = 0.4 (4 + tau), tau = 8/3: share 0.4.
    ({"max_client_share": 0.4}, (2 * 1 + 2 * 4 + 8 / 3 * 102) / (4 + 8 / 3)),
    # Trimmed mean: floor(0.34 * 3) = 1 cut at each end leaves B's 4.
    ({"aggregation": "trimmed-mean", "trim_fraction": 0.34}, 4.0),
    # floor(0.2 * 3) = 0: nothing cut, the unweighted mean over the holders.
    ({"aggregation": "trimmed-mean", "trim_fraction": 0.2}, (1 + 4 + 102) / 3),
    ({"aggregation": "median"}, 4.0),
    # EWF: equal weights; the cap (1/3 <= 0.4 each) changes nothing; the median is DWF's.
    ({"algorithm": "ewf"}, (1 + 4 + 102) / 3),
    ({"algorithm": "ewf", "max_client_share": 0.4}, (1 + 4 + 102) / 3),
    ({"algorithm": "ewf", "aggregation": "median"}, 4.0),
])
def test_each_option_by_hand_then_eq6(tmp_path, options, aggregate):
    # One round of eq. 6 with lr 0.5 from C(0) = 10: C(1) = 10 + 0.5 (D - 10).
    assert one_cluster(tmp_path, num_server_rounds=1, **options) == pytest.approx(
        10 + 0.5 * (aggregate - 10), rel=1e-13)


def test_momentum_applies_after_the_robust_aggregate(tmp_path):
    # D = 4 in every round (k = 1: each local centroid is the client's mean).
    # C(1) = 10 + 0.5 (4 - 10) = 7; C(2) = 7 + 0.5 (4 - 7) + 0.5 (7 - 10) = 4.
    assert one_cluster(tmp_path, num_server_rounds=2, momentum=0.5, aggregation="median") == \
        pytest.approx(4.0, rel=1e-13)


# -- defaults and configuration ----------------------------------------------------------

def test_a_cap_that_nobody_reaches_changes_nothing(tmp_path, s1):
    start = tmp_path / "start.npy"
    np.save(start, s1[START_ROWS])
    federation = InMemoryFederation(iid_parts(s1, 10))
    runs = [WeightedFederatedKMeans(15, init=str(start), tol=0.0, num_server_rounds=4, **o).fit(federation)
            for o in ({}, {"max_client_share": 0.3, "aggregation": "mean"})]
    assert np.array_equal(runs[0].centroids, runs[1].centroids)
    assert [r.score for r in runs[0].history] == [r.score for r in runs[1].history]


def test_options_come_from_the_run_config():
    config = RunConfig.from_mapping({"algorithm": "ewf", "max-client-share": 0.3,
                                     "aggregation": "trimmed-mean", "trim-fraction": 0.1})
    strategy = build_strategy(config)
    assert (strategy.max_client_share, strategy.aggregation, strategy.trim_fraction) == \
        (0.3, "trimmed-mean", 0.1)
    assert {"max-client-share", "aggregation", "trim-fraction"} <= set(config.settings())
    default = build_strategy(RunConfig())
    assert (default.max_client_share, default.aggregation) == (1.0, "mean")
    for bad, allowed in ((("max-client-share", 0.0), "number > 0.0 and <= 1.0"),
                         (("trim-fraction", 0.5), "number >= 0.0 and < 0.5"),
                         (("aggregation", "mode"), "one of 'mean', 'trimmed-mean', 'median'")):
        with pytest.raises(ConfigError, match=allowed):
            RunConfig.from_mapping(dict([bad]))
    with pytest.raises(ConfigError, match="'aggregation': 'mode' .*allowed: one of 'mean'"):
        WeightedFederatedKMeans(3, aggregation="mode")


# -- one poisoned client of ten -----------------------------------------------------------

def poisoned_run(tmp_path, s1, mode, num_server_rounds=30, **options):
    start = tmp_path / "start.npy"
    np.save(start, s1[START_ROWS])
    federation = InMemoryFederation(iid_parts(s1, 10), responders={9: lying_client(mode)})
    return WeightedFederatedKMeans(15, init=str(start), num_server_rounds=num_server_rounds,
                                   **options).fit(federation)


def test_a_client_with_inflated_counts_and_shifted_centroids_is_bounded(tmp_path, s1, s1_centres):
    # The liar declares 1000 x its rows and counts and sends every centroid moved by
    # (3e4, 3e4), 4.2e4 in all: with the paper's mean it holds 99 % of every cluster.
    distance = {name: centre_distance(poisoned_run(tmp_path, s1, "shift", **o).centroids,
                                      s1_centres)
                for name, o in (("mean", {}), ("cap", {"max_client_share": 0.3}),
                                ("trimmed", {"aggregation": "trimmed-mean"}),
                                ("median", {"aggregation": "median"}))}
    clean = 9.6e3  # the honest federation's distance from this start
    assert distance["mean"] > 1.5e5  # about sqrt(15) x 4.2e4
    # The cap: each centroid moves at most 0.3 x 4.2e4 towards the lie.
    assert distance["cap"] < clean + np.sqrt(15) * 0.3 * 4.3e4
    assert distance["trimmed"] < 1.2e4 and distance["median"] < 1.2e4


def test_a_client_sending_far_centroids_is_ignored_by_the_median(tmp_path, s1, s1_centres):
    """Trusting every client (the default rejects the far replies: test_robust_defaults.py),
    the paper's mean takes the far centroids; the median and the trimmed mean do not."""
    mean = poisoned_run(tmp_path, s1, "far", num_server_rounds=5, trust_clients=True)
    assert centre_distance(mean.centroids, s1_centres) > 1e7
    default = poisoned_run(tmp_path, s1, "far", num_server_rounds=5)
    assert centre_distance(default.centroids, s1_centres) < 1.2e4
    for aggregation in ("median", "trimmed-mean"):
        robust = poisoned_run(tmp_path, s1, "far", aggregation=aggregation, trust_clients=True)
        assert centre_distance(robust.centroids, s1_centres) < 1.2e4
        assert np.all(robust.centroids < 1.1e6)


# -- the spread warning -------------------------------------------------------------------

def spread_warnings(records):
    return [line for line in messages(records).splitlines() if WARNING_TAIL in line]


@pytest.mark.parametrize("init", ["local-kmeans", "explicit"])
def test_a_client_in_other_units_is_named_once(tmp_path, s1, flwr_log, init):
    """DWF's rounds name it once; the local-k-means start leaves it out and says so, once."""
    parts = iid_parts(s1, 8)
    parts[3] = parts[3] * 1e6
    federation = InMemoryFederation(parts)
    if init == "explicit":
        np.save(tmp_path / "start.npy", s1[START_ROWS])
        init = str(tmp_path / "start.npy")
    WeightedFederatedKMeans(15, init=init, tol=0.0, num_server_rounds=3, n_init=2).fit(federation)
    [line] = spread_warnings(flwr_log)  # once per node and run, over rounds and restarts
    assert "node 3: feature " in line
    assert line.startswith("round 1: ")
    ratio = float(line.split(" spread ")[1].split(" x ")[0])
    assert ratio > 1e5
    left_out = [line for line in messages(flwr_log).splitlines() if "kept out of the start" in line]
    if init == "local-kmeans":  # once per restart
        assert [line.split(": feature")[0] for line in left_out] == \
            ["init (local k-means): rejected node 3"] * 2
    else:
        assert left_out == []


@pytest.mark.parametrize("split", ["iid", "kmeans-noniid"])
def test_honest_clients_raise_no_spread_warning(tmp_path, s1, flwr_log, split):
    from fedcluster.data import partition_indices

    parts = [s1[p] for p in partition_indices(len(s1), 10, split, points=s1, seed=0)]
    WeightedFederatedKMeans(15, num_server_rounds=10).fit(InMemoryFederation(parts))
    assert spread_warnings(flwr_log) == []
