"""DWF / EWF federated k-means through the strategy and the clients (in-memory federation)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import altered_replies, iid_parts, messages, unreadable_data

from fedcluster.client.respond import CLIENT_FAILURE
from fedcluster.client.memory import InMemoryFederation
from fedcluster.methods.dwf.client import LLOYD
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans
from fedcluster.strategies import RunFailed


def reference_lloyd(X: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, float]:
    """One centralized Lloyd step written plainly: (new centroids, SSE of C)."""
    d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    labels = d2.argmin(axis=1)
    new = np.array([X[labels == j].mean(axis=0) if np.any(labels == j) else C[j]
                    for j in range(len(C))])
    return new, float(d2[np.arange(len(X)), labels].sum())


def run(tmp_path, parts, k, **kwargs):
    return WeightedFederatedKMeans(k, **kwargs).fit(InMemoryFederation(parts))


@pytest.fixture
def s1_start(s1, tmp_path):
    """15 data rows, one near each S1 centre, as an explicit start file."""
    rows = [4, 400, 700, 1000, 1400, 1700, 2000, 2400, 2700, 3000, 3400, 3700, 4000, 4400, 4700]
    path = tmp_path / "start.npy"
    np.save(path, s1[rows])
    return path, s1[rows]


@pytest.mark.parametrize("rounds", [1, 2, 5, 8])
def test_full_participation_one_step_equals_centralized_lloyd(tmp_path, s1, s1_start, rounds):
    path, start = s1_start
    result = run(tmp_path, iid_parts(s1, 5), 15, init=str(path), tol=0.0, num_server_rounds=rounds,
                 lr=1.0, momentum=0.0, local_steps=1)
    C = start
    scores = []
    for _ in range(rounds):
        new, sse = reference_lloyd(s1, C)
        scores.append(sse / len(s1))
        C = new
    assert np.max(np.abs(result.centroids - C)) <= 1e-9
    train = [r for r in result.history if r.phase == "train"]
    assert [r.round for r in train] == list(range(1, rounds + 1))
    np.testing.assert_allclose([r.score for r in train], scores, rtol=1e-12)
    assert all(r.clients_answered == 5 for r in train)


def test_full_participation_matches_sklearn_first_step(tmp_path, s1, s1_start):
    from sklearn.cluster import KMeans

    path, start = s1_start
    result = run(tmp_path, iid_parts(s1, 5), 15, init=str(path), tol=0.0, num_server_rounds=1)
    sk = KMeans(n_clusters=15, init=start, n_init=1, max_iter=1, algorithm="lloyd").fit(s1)
    # scikit-learn subtracts the data mean (about 5e5) before its step and adds it
    # back, so its rounding error scales with the data, not with each centroid:
    # up to 2e-9 here, a few ulps of the mean.
    np.testing.assert_allclose(result.centroids, sk.cluster_centers_, rtol=0,
                               atol=1e-14 * np.abs(s1).max())


def test_standardised_blobs_equal_lloyd_to_1e9_absolute(tmp_path):
    rng = np.random.default_rng(3)
    centres = rng.uniform(-1, 1, size=(4, 3))
    X = np.concatenate([c + 0.1 * rng.standard_normal((250, 3)) for c in centres])
    start = X[[0, 250, 500, 750]] + 0.05
    np.save(tmp_path / "start.npy", start)
    result = run(tmp_path, iid_parts(X, 7, seed=1), 4, init=str(tmp_path / "start.npy"),
                 tol=0.0, num_server_rounds=4)
    C = start
    for _ in range(4):
        C, _ = reference_lloyd(X, C)
    assert np.max(np.abs(result.centroids - C)) <= 1e-9


def hand_case(tmp_path, **kwargs):
    """Two clients on a line; hand-computed in the test bodies below."""
    # A's mean is 1 and B's 12, as if A held {0, 2} and B {10, 12, 14}; each client has
    # the min-cluster-size x k = 4 rows the privacy floor asks for.
    parts = [np.array([[0.0], [2.0], [0.5], [1.5]]), np.array([[10.0], [11.5], [12.5], [14.0]])]
    np.save(tmp_path / "start.npy", np.array([[1.0], [11.0]]))
    return run(tmp_path, parts, 2, init=str(tmp_path / "start.npy"), tol=0.0, **kwargs)


def test_dwf_momentum_matches_hand_computation(tmp_path):
    # Round 1: local centroids A = (1, 11 [empty]), B = (1 [empty], 12); DWF mean D = (1, 12).
    # C1 = C0 + 0.5 (D - C0) + 0.8 (C0 - C0) = (1, 11.5).
    # Round 2: D = (1, 12); C2 = C1 + 0.5 (D - C1) + 0.8 (C1 - C0) = (1, 11.5 + 0.25 + 0.4).
    one = hand_case(tmp_path, num_server_rounds=1, lr=0.5, momentum=0.8)
    np.testing.assert_allclose(one.centroids.ravel(), [1.0, 11.5], rtol=0, atol=1e-12)
    two = hand_case(tmp_path, num_server_rounds=2, lr=0.5, momentum=0.8)
    np.testing.assert_allclose(two.centroids.ravel(), [1.0, 12.15], rtol=0, atol=1e-12)


def test_ewf_uses_equal_weights(tmp_path):
    # EWF: D = ((1 + 1) / 2, (11 + 12) / 2) = (1, 11.5); DWF would give (1, 12).
    ewf = hand_case(tmp_path, num_server_rounds=1, algorithm="ewf")
    np.testing.assert_allclose(ewf.centroids.ravel(), [1.0, 11.5], atol=1e-12)
    dwf = hand_case(tmp_path, num_server_rounds=1, algorithm="dwf")
    np.testing.assert_allclose(dwf.centroids.ravel(), [1.0, 12.0], atol=1e-12)


def test_eq4_fallback_through_client_and_strategy(tmp_path):
    # C0 = (0, 5, 5): ties go to the lower index, so centroid 2 is empty on both
    # clients at the first assignment (DWF weight 0 everywhere) but takes points
    # in the second local step.
    # Every row x below stands for the pair x -+ 0.1 (so that every cluster has the two
    # rows the privacy floor asks for, and no centroid is a row).
    # A = {0, 4, 4, 12}: step 1 gives (0, 20/3, 5), step 2 (0, 12, 4); counts
    # against C0 (2, 6, 0), counts of the last step (2, 2, 4).
    # B = {0.5, 4.5, 12.5, 12.5}: step 1 (0.5, 29.5/3, 5), step 2 (0.5, 12.5, 4.5);
    # counts against C0 (2, 6, 0), of the last step (2, 4, 2).
    # DWF weights are the counts against C0: c0 = (0 + 0.5) / 2 = 0.25,
    # c1 = (6 * 12 + 6 * 12.5) / 12 = 12.25, and c2 falls back to the equal mean
    # (4 + 4.5) / 2 = 4.25 (eq. 4). Last-step counts would give 12.33 and 4.17.
    parts = [np.array([[x - 0.1, x + 0.1] for x in rows]).reshape(-1, 1)
             for rows in ([0.0, 4.0, 4.0, 12.0], [0.5, 4.5, 12.5, 12.5])]
    np.save(tmp_path / "start.npy", np.array([[0.0], [5.0], [5.0]]))
    result = run(tmp_path, parts, 3, init=str(tmp_path / "start.npy"), tol=0.0, num_server_rounds=1,
                 local_steps=2)
    np.testing.assert_allclose(result.centroids.ravel(), [0.25, 12.25, 4.25], atol=1e-12)


def test_ewf_differs_from_dwf_on_non_iid_split(tmp_path, s1, s1_start):
    path, _ = s1_start
    by_x = np.argsort(s1[:, 0])
    sizes = [200, 400, 800, 1600, 2000]  # unequal, each a vertical band of S1
    parts = [s1[np.sort(p)] for p in np.split(by_x, np.cumsum(sizes)[:-1])]
    kwargs = dict(init=str(path), tol=0.0, num_server_rounds=5)
    dwf = run(tmp_path, parts, 15, algorithm="dwf", **kwargs)
    ewf = run(tmp_path, parts, 15, algorithm="ewf", **kwargs)
    assert np.max(np.abs(dwf.centroids - ewf.centroids)) > 1e4
    assert dwf.score < ewf.score


def test_tol_stops_the_run_and_marks_it_converged(tmp_path, s1):
    result = run(tmp_path, iid_parts(s1, 4), 15, init="local-kmeans", tol=1e-6, num_server_rounds=50)
    assert result.converged
    assert result.rounds < 50
    train = [r for r in result.history if r.phase == "train"]
    assert train[-1].movement < 1e-6 <= min(r.movement for r in train[:-1])


def test_partial_participation_samples_reproducibly(tmp_path, s1):
    parts = iid_parts(s1, 10)
    kwargs = dict(init="random", tol=0.0, num_server_rounds=6, participation=0.3, seed=11)
    a = run(tmp_path, parts, 15, **kwargs)
    b = run(tmp_path, parts, 15, **kwargs)
    train = [r for r in a.history if r.phase == "train"]
    assert all(r.clients_sampled == 3 for r in train)
    assert len({r.participants for r in train}) > 1
    assert [r.participants for r in a.history] == [r.participants for r in b.history]
    np.testing.assert_array_equal(a.centroids, b.centroids)
    fixed = run(tmp_path, parts, 15, **{**kwargs, "clients_per_round": 4})
    assert all(r.clients_sampled == 4 for r in fixed.history if r.phase == "train")


def test_random_init_stays_in_the_federated_bounding_box(tmp_path, s1):
    result = run(tmp_path, iid_parts(s1, 3), 15, init="random", tol=0.0, num_server_rounds=1)
    init = [r for r in result.history if r.phase == "init"]
    assert len(init) == 1 and init[0].clients_answered == 3
    assert np.all(result.centroids >= s1.min(axis=0)) and np.all(result.centroids <= s1.max(axis=0))


def test_local_kmeans_init_gets_close_to_the_true_centres(tmp_path, s1, s1_centres):
    from fedcluster.metrics import centre_distance

    result = run(tmp_path, iid_parts(s1, 10), 15, init="local-kmeans", num_server_rounds=100)
    assert centre_distance(result.centroids, s1_centres) < 1.3e4
    assert result.counts.sum() == len(s1)
    assert result.n_points == len(s1)


def test_n_init_keeps_the_restart_with_the_best_exact_score(tmp_path, s1):
    parts = iid_parts(s1, 4)
    kwargs = dict(init="random", num_server_rounds=30, seed=5)
    best = run(tmp_path, parts, 15, n_init=4, **kwargs)
    assert {r.restart for r in best.history} == {0, 1, 2, 3}
    d2 = ((s1[:, None, :] - best.centroids[None]) ** 2).sum(axis=2).min(axis=1)
    assert best.score == pytest.approx(d2.mean(), rel=1e-12)
    # Restart r of an n_init run is the run a single restart with the same seed makes.
    first = run(tmp_path, parts, 15, n_init=1, **kwargs)
    assert best.score <= first.score
    assert (best.best_restart == 0) == (best.score == first.score)


def corrupting(mode):
    """A client that damages its train replies as ``mode`` says (other replies are honest)."""

    def change(summary, request, node_config):
        if request.kind != LLOYD:
            return summary
        if mode == "nan":
            bad = summary.centroids.copy()
            bad[0, 0] = np.nan
            return dataclasses.replace(summary, centroids=bad)
        if mode == "shape":
            return dataclasses.replace(summary, centroids=summary.centroids[:-1])
        if mode == "negative":
            bad = summary.counts.copy()
            bad[0] = -1.0
            return dataclasses.replace(summary, counts=bad)
        if mode == "raise":
            raise RuntimeError("simulated crash in the client")
        raise AssertionError(mode)

    return altered_replies(change)


def test_bad_clients_are_rejected_logged_and_the_run_goes_on(tmp_path, s1, s1_start, flwr_log):
    path, _ = s1_start
    parts = iid_parts(s1, 6)
    responders = {i: corrupting(mode) for i, mode in enumerate(["nan", "shape", "negative", "raise"])}
    responders[4] = unreadable_data(tmp_path / "missing.npy")
    federation = InMemoryFederation(parts, responders=responders)
    result = WeightedFederatedKMeans(15, init=str(path), tol=0.0, num_server_rounds=2,
                                     min_answer_fraction=0.1).fit(federation)

    good = parts[5]
    C = np.load(path)
    for _ in range(2):
        C, _ = reference_lloyd(good, C)
    np.testing.assert_allclose(result.centroids, C, rtol=1e-12)
    for record in (r for r in result.history if r.phase == "train"):
        assert (record.clients_sampled, record.clients_answered, record.clients_rejected) == (6, 1, 5)
        assert record.participants == (5,)
    log = messages(flwr_log)
    assert "rejected node 0: malformed reply: 'centroids' has non-finite values" in log
    assert ("rejected node 1: malformed reply: 'centroids' has shape (14, 2), "
            "expected (15, 2)" in log)
    assert "rejected node 2: malformed reply: 'counts' has negative values" in log
    assert (f"rejected node 3: error reply (code {CLIENT_FAILURE}): RuntimeError: simulated crash"
            in log)
    assert "rejected node 4: error reply (code 400): client data" in log
    assert "missing.npy" in log


def test_unreachable_client_is_reported_missing(tmp_path, s1, s1_start, flwr_log):
    path, _ = s1_start
    federation = InMemoryFederation(iid_parts(s1, 3))
    first, lost, third = federation.node_ids()
    federation.unreachable.add(lost)
    result = WeightedFederatedKMeans(15, init=str(path), tol=0.0, num_server_rounds=1,
                                     round_timeout=0.1).fit(federation)
    train = [r for r in result.history if r.phase == "train"]
    assert train[0].participants == tuple(sorted((first, third)))
    assert f"no reply within 0.1 s from node(s) [{lost}]" in messages(flwr_log)


def test_round_without_usable_reply_fails_the_run(tmp_path, s1, s1_start):
    path, start = s1_start
    federation = InMemoryFederation([start], responders={0: unreadable_data(tmp_path / "nothing.npy")})
    strategy = WeightedFederatedKMeans(15, init=str(path), tol=0.0, num_server_rounds=2)
    with pytest.raises(RunFailed, match=(
            r"round 1: 0 of 1 clients answered usably, min-answer-fraction 0.5 needs 1 "
            r"\(node 0: error reply \(code 400\): client data .*nothing.npy")):
        strategy.fit(federation)


@pytest.mark.parametrize(("answering", "fails"), [(3, True), (6, False)])
def test_a_minority_of_answers_fails_the_round(tmp_path, s1, s1_start, answering, fails):
    path, _ = s1_start
    missing = unreadable_data(tmp_path / "missing.npy")
    federation = InMemoryFederation(iid_parts(s1, 12),
                                    responders={i: missing for i in range(answering, 12)})
    strategy = WeightedFederatedKMeans(15, init=str(path), tol=0.0, num_server_rounds=1)
    if fails:
        with pytest.raises(RunFailed, match="3 of 12 clients answered usably, "
                           "min-answer-fraction 0.5 needs 6 .*; 7 more rejected"):
            strategy.fit(federation)
    else:
        [train] = [r for r in strategy.fit(federation).history if r.phase == "train"]
        assert (train.clients_sampled, train.clients_answered, train.clients_rejected) == (12, 6, 6)


def test_explicit_start_replaces_init_and_gives_flowers_result(tmp_path, s1, s1_start):
    # What FlowerStrategy.start(grid, initial_arrays, num_rounds) does to the strategy
    # (explicit_start, num_server_rounds), then its Result (to_result).
    from fedcluster.server.flower import to_result

    _, start = s1_start
    strategy = WeightedFederatedKMeans(15, init="random", tol=0.0)
    strategy.explicit_start = start
    strategy.override(num_server_rounds=3)
    run_result = strategy.fit(InMemoryFederation(iid_parts(s1, 2)))
    assert [r.phase for r in run_result.history] == ["train"] * 3
    result = to_result(run_result)
    expected = start
    for _ in range(3):
        expected, _ = reference_lloyd(s1, expected)
    np.testing.assert_allclose(result.arrays["centroids"].numpy(), expected, rtol=1e-12)
    assert sorted(result.train_metrics_clientapp) == [1, 2, 3]
