"""The no-budget start spread apart in a box (``init = spread``, fedcluster/numerics/spread.py).

It is data-independent (only the box and the seed decide it), lies in the
box, keeps its centres farther apart than uniform draws do, and splits G2's
two Gaussians where uniform draws merge them; a DP run starts from it in the
declared bounds, a plain run in the federated bounding box.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.config import RunConfig, build_strategy
from fedcluster.data import load_dataset, partition_indices
from fedcluster.client.memory import InMemoryFederation
from fedcluster.numerics import random_in_box, spread_in_box


def closest_pair(centres: np.ndarray) -> float:
    gaps = np.linalg.norm(centres[:, None] - centres[None], axis=2)
    return float(gaps[np.triu_indices(len(centres), 1)].min())


def test_the_spread_start_lies_in_the_box_and_the_seed_fixes_it():
    low, high = np.array([0.0, -5.0, 10.0]), np.array([1.0, 5.0, 1e3])
    a = spread_in_box(low, high, 7, rng=np.random.default_rng(3))
    b = spread_in_box(low, high, 7, rng=np.random.default_rng(3))
    c = spread_in_box(low, high, 7, rng=np.random.default_rng(4))
    assert a.shape == (7, 3) and np.all(a >= low) and np.all(a <= high)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_spread_centres_keep_farther_apart_than_uniform_draws():
    low, high = np.zeros(2), np.full(2, 1e6)
    spread = [closest_pair(spread_in_box(low, high, 15, rng=np.random.default_rng(s)))
              for s in range(5)]
    uniform = [closest_pair(random_in_box(low, high, 15, rng=np.random.default_rng(s)))
               for s in range(5)]
    # 15 cells of a square of side 1e6 are about 2.6e5 across; uniform draws come far closer.
    assert min(spread) > 1.5e5 and min(spread) > 2 * max(uniform)


def test_the_spread_start_splits_g2s_two_gaussians_in_every_seed():
    data = load_dataset("g2-16-30")
    for seed in range(5):
        centres = spread_in_box(np.zeros(16), np.full(16, 1100.0), 2, rng=np.random.default_rng(seed))
        for _ in range(3):  # a few of Lloyd's steps, as the rounds take them
            nearest = np.argmin(np.linalg.norm(data.X[:, None] - centres[None], axis=2), axis=1)
            centres = np.array([data.X[nearest == j].mean(axis=0) for j in range(2)])
        agree = np.mean(nearest == data.labels)
        assert max(agree, 1 - agree) > 0.99, (seed, agree)


def test_a_dp_run_starts_spread_in_the_declared_bounds_and_finds_g2s_clusters():
    data = load_dataset("g2-16-30")
    parts = [data.X[i] for i in partition_indices(len(data.X), 4, "iid", seed=0)]
    for seed in range(3):
        result = build_strategy(RunConfig.from_mapping({
            "k": 2, "seed": seed, "init": "spread", "data-bounds": "0:1100", "dp": "central",
            "secure-aggregation": True, "dp-epsilon": 1.0, "num-server-rounds": 5, "tol": 0.0,
        })).fit(InMemoryFederation(parts))
        # The two true centres lie at 500 and 600 per feature: one centroid near each. The noise
        # is fresh in every run: over 30 runs the farthest mean lay 2.9-15.8 from its centre
        # (mean 6.8), where two merged centroids lie 50 from theirs.
        means = np.sort(result.centroids.mean(axis=1))
        assert means == pytest.approx([500.0, 600.0], abs=35.0), (seed, means)


def test_a_plain_run_starts_spread_in_the_federated_bounding_box():
    X = load_dataset("s1").X
    parts = [X[i] for i in partition_indices(len(X), 3, "iid", seed=0)]
    result = build_strategy(RunConfig.from_mapping({
        "k": 15, "seed": 0, "init": "spread", "num-server-rounds": 1, "tol": 0.0,
    })).fit(InMemoryFederation(parts))
    init = [r for r in result.history if r.phase == "init"]
    assert len(init) == 1 and init[0].clients_answered == 3
    assert np.all(result.centroids >= X.min(axis=0)) and np.all(result.centroids <= X.max(axis=0))


# -- the private start (init = private, fedcluster/privacy/start.py) --------------------------

def blobs(rows_each: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three tight 2-D blobs far apart in the box 0:100, and their centres."""
    centres = np.array([[20.0, 20.0], [80.0, 30.0], [50.0, 85.0]])
    rng = np.random.default_rng(seed)
    return np.concatenate([c + rng.normal(0, 1.0, (rows_each, 2)) for c in centres]), centres


def test_the_coreset_represents_a_cell_by_its_noisy_mean_and_drops_cells_beyond_the_rule():
    """Cell points far from the data (data-blind), exact sums: the representatives are the
    cells' means, so weighted k-means finds the blobs; a cell whose sum is beyond count x R
    (a liar's) is dropped; below k cells kept the kept cells' representatives are the start."""
    from fedcluster.privacy.mechanism import Clipping
    from fedcluster.privacy.start import centres_from_cells

    clipping = Clipping.declared("0:100", 0.0, 2)
    X, truth = blobs()
    points = np.array([[0.0, 0.0], [100.0, 0.0], [40.0, 100.0], [100.0, 100.0]])
    labels = np.argmin(np.linalg.norm(X[:, None] - points[None], axis=2), axis=1)
    sums = np.array([(clipping.clip(X[labels == j])).sum(axis=0) for j in range(4)])
    counts = np.bincount(labels, minlength=4).astype(float)
    assert counts[3] == 0
    sums[3], counts[3] = [1e9, 1e9], 300.0  # a liar's cell: far beyond 300 rows of radius R
    centres = centres_from_cells(points, sums, counts, clipping, 1e-3, 3,
                                 rng=np.random.default_rng(0))
    np.testing.assert_allclose(np.sort(centres, axis=0), np.sort(truth, axis=0), atol=0.5)
    fewer = centres_from_cells(points, sums, counts, clipping, 1e-3, 4,
                               rng=np.random.default_rng(0))
    np.testing.assert_allclose(np.sort(fewer, axis=0), np.sort(truth, axis=0), atol=0.5)
    # Noise of 1e4 per sum coordinate: 3 deviations of the count noise 1e4 / w exceed each count.
    assert centres_from_cells(points, sums, counts, clipping, 1e4, 3,
                              rng=np.random.default_rng(0)).shape == (0, 2)


def test_the_cell_points_move_onto_the_sphere_of_the_given_radius_in_many_dimensions():
    """Each of the box's Halton points (the seed fixes them) moves along its ray from the box's
    centre; in 2-D, where the box's points do not lie on a shell, none is moved."""
    from fedcluster.privacy.start import cell_count, cells

    low, high = np.full(50, -1.0), np.full(50, 3.0)
    box = cells(low, high, 8, rng=np.random.default_rng(4))
    moved = cells(low, high, 8, rng=np.random.default_rng(4), radius=1.5)
    assert len(moved) == cell_count(8, 50)
    np.testing.assert_allclose(np.linalg.norm(moved - 1.0, axis=1), 1.5)
    rays = (box - 1.0) / np.linalg.norm(box - 1.0, axis=1, keepdims=True)
    np.testing.assert_allclose(moved, 1.0 + 1.5 * rays)
    flat = [cells(low[:2], high[:2], 8, rng=np.random.default_rng(4), radius=r) for r in (0, 1.5)]
    np.testing.assert_array_equal(*flat)


def test_the_coreset_start_finds_well_separated_blobs_at_a_large_epsilon():
    X, truth = blobs()
    parts = [X[i] for i in partition_indices(len(X), 3, "iid", seed=0)]
    result = build_strategy(RunConfig.from_mapping({
        "k": 3, "seed": 0, "init": "private", "data-bounds": "0:100", "dp": "central",
        "secure-aggregation": True, "dp-epsilon": 100.0, "num-server-rounds": 1, "tol": 0.0,
    })).fit(InMemoryFederation(parts))
    np.testing.assert_allclose(np.sort(result.centroids, axis=0), np.sort(truth, axis=0), atol=2.0)


def test_the_reply_sums_clipped_rows_and_is_sent_only_under_dp_and_masked():
    """A client's cell sums are of rows clipped into the request's bounds (norm <= count x R,
    as a round's), its noise share is z_s Delta / sqrt(t) with the rounds' Delta, and it
    refuses outside DP, outside secure aggregation and without bounds."""
    from fedcluster.client.respond import respond
    from fedcluster.local.private import SETUP_STEPS, Masking
    from fedcluster.messages import ProtocolError, Request
    from fedcluster.privacy.accountant import split
    from fedcluster.privacy.kinds import (CELL_SUMS, CLIENT_NOISE_KEY, ROUNDS_KEY,
                                          SETUP_NOISE_KEY, STEP_NOISE_KEY)
    from fedcluster.privacy.mechanism import Clipping, clipped_sums, client_noise_scale

    X, _ = blobs(rows_each=20)
    X = X * 10.0  # rows far outside the box 0:100
    cells = np.array([[10.0, 10.0], [90.0, 90.0]])
    setup, z = split(1.0, 1e-5, 5, {"start": 0.2})
    first = setup["start"]
    config = {"dp": "distributed", "dp-epsilon": 1.0, "dp-delta": 1e-5, "dp-noise-multiplier": z,
              ROUNDS_KEY: 5, SETUP_NOISE_KEY: first, STEP_NOISE_KEY: first, CLIENT_NOISE_KEY: 0.0,
              "data-bounds": "0:100", "dp-clip": 0.0, "chunk-size": 1024}
    clipping = Clipping.declared("0:100", 0.0, 2)
    assert SETUP_STEPS[CELL_SUMS](2, config) == clipping.sensitivity
    masking = Masking(threshold=2, fraction_bits=24)
    with pytest.raises(ProtocolError, match="only masked, inside secure aggregation"):
        respond(X, Request(CELL_SUMS, config, cells), {})
    with pytest.raises(ProtocolError, match="only under DP, inside secure"):
        respond(X, Request(CELL_SUMS, {**config, "dp": "off"}, cells), {})
    with pytest.raises(ProtocolError, match="needs data-bounds"):
        respond(X, Request(CELL_SUMS, {**config, "data-bounds": ""}, cells), {}, masking=masking)
    with pytest.raises(ProtocolError, match="below this client's own share"):
        respond(X, Request(CELL_SUMS, config, cells), {}, masking=masking)
    share = client_noise_scale(first, clipping, 2)
    assert share == pytest.approx(first * clipping.sensitivity / np.sqrt(2))
    # The exact reply (central DP: the server adds the noise) is the clipped sums.
    exact = respond(X, Request(CELL_SUMS, {**config, "dp": "central"}, cells), {},
                    masking=masking)
    labels = np.argmin(np.linalg.norm(X[:, None] - cells[None], axis=2), axis=1)
    sums, counts = clipped_sums(X, labels, 2, clipping)
    np.testing.assert_allclose(exact.sums, sums)
    np.testing.assert_array_equal(exact.counts, counts)
    assert np.all(np.linalg.norm(exact.sums, axis=1) <= counts * clipping.radius * (1 + 1e-9))
    noisy = respond(X, Request(CELL_SUMS, {**config, CLIENT_NOISE_KEY: share}, cells), {},
                    masking=masking)
    assert not np.allclose(noisy.sums, sums) and not np.allclose(noisy.counts, counts)


def test_a_private_start_spends_its_share_and_finds_g2s_clusters():
    """Epsilon 2: at 1 the fresh noise (4 clients' 2,048 rows) once put both centroids off
    the data (a clean-clone CI run: means 373 and 551; 0 of 40 runs alone did)."""
    from fedcluster.privacy.accountant import epsilon_spent, split

    data = load_dataset("g2-16-30")
    parts = [data.X[i] for i in partition_indices(len(data.X), 4, "iid", seed=0)]
    result = build_strategy(RunConfig.from_mapping({
        "k": 2, "seed": 0, "init": "private", "data-bounds": "0:1100", "dp": "central",
        "secure-aggregation": True, "dp-epsilon": 2.0, "num-server-rounds": 3, "tol": 0.0,
    })).fit(InMemoryFederation(parts))
    setup, z = split(2.0, 1e-5, 3, {"start": 0.2})
    init = [r for r in result.history if r.phase == "init"]
    assert len(init) == 1 and init[0].clients_answered == 4
    assert init[0].epsilon == pytest.approx(epsilon_spent(0.0, 0, 1e-5, setup["start"]))
    assert result.history[-1].epsilon == pytest.approx(2.0, abs=2e-3)
    assert result.history[-1].epsilon <= 2.0
    means = np.sort(result.centroids.mean(axis=1))
    assert means == pytest.approx([500.0, 600.0], abs=15.0)


def test_a_liars_cell_sums_cannot_fail_the_start_or_get_honest_clients_rejected(monkeypatch):
    from fedcluster.client.respond import STEPS
    from fedcluster.messages import ClientSummary
    from fedcluster.privacy.kinds import CELL_SUMS

    X = load_dataset("s1").X
    parts = [X[i] for i in partition_indices(len(X), 4, "iid", seed=0)]
    liar, honest_step = parts[0], STEPS[CELL_SUMS]

    def lying(rows, centroids, config):
        summary = honest_step(rows, centroids, config)
        if rows is not liar:
            return summary
        return ClientSummary(n=summary.n, sums=np.full_like(summary.sums, 1e12),
                             counts=np.full_like(summary.counts, -1e15))

    monkeypatch.setitem(STEPS, CELL_SUMS, lying)
    result = build_strategy(RunConfig.from_mapping({
        "k": 15, "seed": 0, "init": "private", "dp": "central", "secure-aggregation": True,
        "num-server-rounds": 1, "tol": 0.0,
    })).fit(InMemoryFederation(parts))
    assert all(r.clients_rejected == 0 and r.clients_answered == 4 for r in result.history)
    assert result.rounds == 1


def test_a_private_start_needs_dp():
    from fedcluster.config import ConfigError

    with pytest.raises(ConfigError, match="init = private is the start of a DP run"):
        RunConfig.from_mapping({"init": "private"})


def test_a_dp_run_that_names_no_start_takes_the_private_one():
    """DP needs no guessing: without --init a DP run starts from the private start, the DP
    coreset (the method's default start, local k-means, would send each client's centroids and
    is refused under DP); the spread start stays the no-budget choice when named."""
    from fedcluster.config import RunConfig

    for algorithm in ("dwf", "ewf", "fedkmeans", "ffcm-avg1"):
        config = RunConfig.from_mapping({"algorithm": algorithm, "dp": "central",
                                         "secure-aggregation": True, "dp-epsilon": 1.0})
        assert config.init == "private", algorithm
    named = RunConfig.from_mapping({"dp": "central", "secure-aggregation": True,
                                    "dp-epsilon": 1.0, "init": "spread"})
    assert named.init == "spread"
    assert RunConfig.from_mapping({}).init == "local-kmeans"
    # The estimator passes what differs from the defaults, so the same holds for it.
    from fedcluster import FederatedKMeans

    assert FederatedKMeans(dp="central", secure_aggregation=True).config().init == "private"
    assert FederatedKMeans().config().init == "local-kmeans"
