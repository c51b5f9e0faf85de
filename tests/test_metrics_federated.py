"""Federated metrics equal their pooled computation (fedcluster.metrics.federated)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcluster.metrics import centre_distance, cluster_means, combine, contingency_metrics, knowledge_gap, local_statistics, normalised_knowledge_gap, sum_statistics
from fedcluster.numerics.lloyd import assign

sk = pytest.importorskip("sklearn.metrics")
KMeans = pytest.importorskip("sklearn.cluster").KMeans

LABEL_VALUES = np.array([-7, 3, 42, 1000, 5])  # arbitrary integers, not 0..L-1


def federation(seed: int, n: int = 900, d: int = 3, groups: int = 6):
    """Rows around ``groups`` centres, arbitrary integer labels, five uneven clients.

    Client 0 holds only rows labelled -7 or 3 (it lacks the other labels).
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(groups, d))
    member = rng.integers(groups, size=n)
    X = centres[member] + rng.normal(size=(n, d))
    # Labels agree with the groups most of the time, so the scores are not trivial.
    labels = np.where(rng.random(n) < 0.7, LABEL_VALUES[member % len(LABEL_VALUES)],
                      rng.choice(LABEL_VALUES, size=n))
    few = np.flatnonzero(np.isin(labels, [-7, 3]))[:60]
    rest = rng.permutation(np.setdiff1d(np.arange(n), few))
    cuts = np.sort(rng.choice(np.arange(1, len(rest)), size=3, replace=False))
    parts = [few, *np.split(rest, cuts)]
    return X, labels, parts


def with_empty_cluster(centroids: np.ndarray) -> np.ndarray:
    """The centroids plus one that no row is nearest to (an empty cluster)."""
    far = centroids.max(axis=0) + 1e3
    return np.vstack([centroids[:2], far, centroids[2:]])


def pooled_clusters(X, centroids):
    clusters, _ = assign(X, centroids)
    return clusters


@pytest.fixture(params=[0, 1, 2])
def case(request):
    X, labels, parts = federation(request.param)
    rng = np.random.default_rng(100 + request.param)
    centroids = with_empty_cluster(X[rng.choice(len(X), size=5, replace=False)] + 0.3)
    return X, labels, parts, centroids


def test_the_federation_has_what_the_tests_need(case):
    X, labels, parts, centroids = case
    assert not set(LABEL_VALUES) <= set(labels[parts[0]])
    clusters = pooled_clusters(X, centroids)
    assert np.bincount(clusters, minlength=len(centroids))[2] == 0


def test_label_metrics_equal_scikit_learn(case):
    X, labels, parts, centroids = case
    stats = [local_statistics(X[p], centroids, labels[p], chunk_size=64) for p in parts]
    got = combine(stats, centroids)
    clusters = pooled_clusters(X, centroids)
    expected = {
        "homogeneity": sk.homogeneity_score(labels, clusters),
        "completeness": sk.completeness_score(labels, clusters),
        "v_measure": sk.v_measure_score(labels, clusters),
        "ari": sk.adjusted_rand_score(labels, clusters),
        "nmi": sk.normalized_mutual_info_score(labels, clusters),
    }
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_label_metrics_with_a_global_vocabulary_are_the_same(case):
    X, labels, parts, centroids = case
    own = combine([local_statistics(X[p], centroids, labels[p]) for p in parts], centroids)
    shared = combine([local_statistics(X[p], centroids, labels[p], label_values=LABEL_VALUES)
                      for p in parts], centroids)
    for key in ("accuracy", "purity", "homogeneity", "completeness", "v_measure", "ari", "nmi"):
        assert shared[key] == own[key]


def test_davies_bouldin_two_passes_equal_scikit_learn(case):
    # First pass: counts and sums give the cluster means; second pass: distances to them.
    X, labels, parts, centroids = case
    first = [local_statistics(X[p], centroids) for p in parts]
    means = cluster_means(first, centroids)
    second = [local_statistics(X[p], centroids, reference=means) for p in parts]
    got = combine(second, centroids, reference=means)
    expected = sk.davies_bouldin_score(X, pooled_clusters(X, centroids))
    assert got["davies_bouldin"] == pytest.approx(expected, rel=1e-12)


def test_davies_bouldin_of_converged_centroids_equals_scikit_learn(case):
    # At a Lloyd fixed point the centroids are the cluster means: one pass suffices.
    X, labels, parts, _ = case
    model = KMeans(5, n_init=3, tol=0.0, max_iter=1000, random_state=0).fit(X)
    centroids = with_empty_cluster(model.cluster_centers_)
    clusters = pooled_clusters(X, centroids)
    assert np.array_equal(np.unique(clusters), [0, 1, 3, 4, 5])
    stats = [local_statistics(X[p], centroids) for p in parts]
    got = combine(stats, centroids)
    assert got["davies_bouldin"] == pytest.approx(sk.davies_bouldin_score(X, clusters), rel=1e-12)
    assert got["empty_clusters"] == 1.0


def test_distance_metrics_equal_their_pooled_definitions(case):
    X, labels, parts, centroids = case
    got = combine([local_statistics(X[p], centroids, labels[p]) for p in parts], centroids)
    n, d = X.shape
    dist = np.sqrt(((X[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2))
    own = dist.argmin(axis=1)
    mine = dist[np.arange(n), own]
    others = dist.copy()
    others[np.arange(n), own] = np.nan
    assert got["n"] == n
    assert got["sse"] == pytest.approx((mine**2).sum(), rel=1e-12)
    assert got["score"] == pytest.approx((mine**2).mean(), rel=1e-12)
    assert got["mean_intra_distance"] == pytest.approx(mine.mean(), rel=1e-12)
    assert got["ffcm_within_sse"] == pytest.approx(mine.sum() / (n * d), rel=1e-12)
    assert got["ffcm_outside_sse"] == pytest.approx(np.nansum(others) / (n * d), rel=1e-12)
    assert got["ffcm_within_sse_squared"] == pytest.approx((mine**2).sum() / (n * d), rel=1e-12)
    assert got["ffcm_outside_sse_squared"] == pytest.approx(np.nansum(others**2) / (n * d),
                                                            rel=1e-12)
    b = np.nanmin(others, axis=1)
    simplified = np.mean((b - mine) / np.maximum(mine, b))
    assert got["simplified_silhouette"] == pytest.approx(simplified, rel=1e-12)


def test_metrics_do_not_depend_on_the_split_or_the_chunks(case):
    X, labels, parts, centroids = case
    pooled = combine([local_statistics(X, centroids, labels)], centroids)
    split = combine([local_statistics(X[p], centroids, labels[p], chunk_size=7) for p in parts],
                    centroids)
    assert pooled.keys() == split.keys()
    for key, value in pooled.items():
        assert split[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_accuracy_is_the_dwf_papers_majority_mapping(case):
    # The DWF authors map each predicted cluster to its most frequent true label
    # (flkmeans.utils.map_pred_to_true) and take the accuracy of the mapped labels.
    X, labels, parts, centroids = case
    got = combine([local_statistics(X[p], centroids, labels[p]) for p in parts], centroids)
    clusters = pooled_clusters(X, centroids)
    mapped = np.empty_like(labels)
    for c in np.unique(clusters):
        values, counts = np.unique(labels[clusters == c], return_counts=True)
        mapped[clusters == c] = values[counts.argmax()]
    assert got["accuracy"] == pytest.approx(sk.accuracy_score(labels, mapped), rel=1e-15)
    assert got["purity"] == got["accuracy"]


def test_accuracy_and_purity_by_hand():
    # Clusters at 0, 10, 20 (and an empty one at 99):
    #   cluster 0: labels 5, 5, 5, 8   -> majority 3 of 4
    #   cluster 1: labels 8, 8, 9, 9   -> majority 2 of 4
    #   cluster 2: labels 9, 9         -> majority 2 of 2
    X = np.array([0, 0.1, 0.2, 0.3, 10, 10.1, 10.2, 10.3, 20, 20.1])[:, None]
    labels = np.array([5, 5, 5, 8, 8, 8, 9, 9, 9, 9])
    centroids = np.array([[0.0], [10.0], [20.0], [99.0]])
    stats = [local_statistics(X[:5], centroids, labels[:5]),
             local_statistics(X[5:], centroids, labels[5:])]
    got = combine(stats, centroids)
    assert got["accuracy"] == got["purity"] == pytest.approx(7 / 10)
    assert got["cluster_purity"] == pytest.approx((3 / 4 + 2 / 4 + 1) / 3)
    np.testing.assert_array_equal(sum_statistics(stats).contingency,
                                  [[3, 1, 0], [0, 2, 2], [0, 0, 2], [0, 0, 0]])
    np.testing.assert_array_equal(sum_statistics(stats).label_values, [5, 8, 9])


def test_contingency_edge_cases_follow_scikit_learn():
    one_cluster = contingency_metrics([[3, 2]])
    assert one_cluster["homogeneity"] == 0.0 and one_cluster["completeness"] == 1.0
    assert one_cluster["nmi"] == 0.0 and one_cluster["ari"] == 0.0
    perfect = contingency_metrics([[4, 0], [0, 0], [0, 6]])
    assert perfect["v_measure"] == perfect["nmi"] == perfect["ari"] == perfect["accuracy"] == 1.0
    single = contingency_metrics([[5]])
    ones, zeros = [1] * 5, [0] * 5
    expected = (sk.homogeneity_score(ones, zeros), sk.normalized_mutual_info_score(ones, zeros),
                sk.adjusted_rand_score(ones, zeros))
    assert (single["homogeneity"], single["nmi"], single["ari"]) == expected
    with pytest.raises(ValueError, match="empty"):
        contingency_metrics([[0, 0]])


def test_absent_metrics_are_missing_not_nan():
    X = np.array([[0.0], [1.0], [2.0]])
    no_labels = combine([local_statistics(X, np.array([[0.0], [5.0]]))], np.array([[0.0], [5.0]]))
    for key in ("accuracy", "purity", "v_measure", "ari", "nmi", "centre_distance",
                "knowledge_gap", "normalised_knowledge_gap", "davies_bouldin"):
        assert key not in no_labels  # one non-empty cluster: no Davies-Bouldin either
    assert "simplified_silhouette" in no_labels
    single = combine([local_statistics(X, np.array([[1.0]]))], np.array([[1.0]]))
    assert "simplified_silhouette" not in single and "davies_bouldin" not in single
    assert all(np.isfinite(v) for v in single.values())


def test_mixed_labelled_and_unlabelled_clients_are_refused():
    X = np.array([[0.0], [1.0]])
    c = np.array([[0.0], [1.0]])
    with pytest.raises(ValueError, match="1 of 2 clients sent no contingency table"):
        combine([local_statistics(X, c, [1, 2]), local_statistics(X, c)], c)
    with pytest.raises(ValueError, match="no client statistics"):
        combine([], c)
    with pytest.raises(ValueError, match="clients disagree on"):
        combine([local_statistics(X, c), local_statistics(X, np.zeros((3, 1)))], c)
    with pytest.raises(ValueError, match="centroids must have shape"):
        combine([local_statistics(X, c)], np.zeros((3, 1)))


def test_true_centre_metrics():
    X = np.array([[0.0, 0.0], [3.0, 4.0]])
    centroids = X.copy()
    true = np.array([[0.0, 1.0], [10.0, 10.0], [3.0, 0.0]])
    got = combine([local_statistics(X, centroids)], centroids, true_centres=true)
    assert got["knowledge_gap"] == pytest.approx(1.0 + 4.0)
    assert got["normalised_knowledge_gap"] == pytest.approx(5.0 / np.sqrt(2))
    assert got["centre_distance"] == centre_distance(centroids, true)


def test_knowledge_gap_by_hand():
    # Each found centre to its nearest true centre: (0,0)->(0,1) is 1, (3,4)->(3,0) is 4.
    found = np.array([[0.0, 0.0], [3.0, 4.0]])
    true = np.array([[0.0, 1.0], [10.0, 10.0], [3.0, 0.0]])
    assert knowledge_gap(found, true) == 5.0
    assert normalised_knowledge_gap(found, true) == pytest.approx(5.0 / np.sqrt(2.0))
    # G2-like: two centres 100 apart in 16-D, found ones shifted by 1 per coordinate.
    true = np.array([[500.0] * 16, [600.0] * 16])
    found = true + 1.0
    assert knowledge_gap(found, true) == pytest.approx(2 * 4.0)
    assert normalised_knowledge_gap(found, true) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="one dimension"):
        knowledge_gap(found, true[:, :3])


def test_centre_distance_by_hand():
    found = np.array([[0.0, 0.0], [10.0, 0.0]])
    true = np.array([[10.0, 1.0], [0.0, 2.0]])
    assert centre_distance(found, true) == pytest.approx(np.sqrt(4.0 + 1.0))
    assert centre_distance(found[:1], true) == pytest.approx(2.0)


def test_ffcm_measures_by_hand():
    # 1-D rows 0, 2, 10 with centres 1 and 10: within distances 1, 1, 0; outside 10, 8, 9.
    X = np.array([[0.0], [2.0], [10.0]])
    c = np.array([[1.0], [10.0]])
    got = combine([local_statistics(X[:1], c), local_statistics(X[1:], c)], c)
    assert got["ffcm_within_sse"] == pytest.approx(2 / 3)
    assert got["ffcm_outside_sse"] == pytest.approx(27 / 3)
    assert got["ffcm_within_sse_squared"] == pytest.approx(2 / 3)
    assert got["ffcm_outside_sse_squared"] == pytest.approx(245 / 3)
    assert got["score"] == pytest.approx(2 / 3)
    assert got["mean_intra_distance"] == pytest.approx(2 / 3)


def test_ffcm_measure_reproduces_the_papers_table_4():
    # Case 3 with the true centres: four unit-variance 2-D Gaussians at the corners of a
    # square of side 10. Table 4 (central clustering, 1000 points per client): within
    # SSE 0.63, outside SSE 17.14 -- plain distances / (N d), not squared ones.
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [0.0, 10.0], [10.0, 10.0], [10.0, 0.0]])
    X = np.concatenate([c + rng.normal(size=(5000, 2)) for c in centres])
    got = combine([local_statistics(X, centres)], centres)
    assert got["ffcm_within_sse"] == pytest.approx(0.63, abs=0.01)
    assert got["ffcm_outside_sse"] == pytest.approx(17.14, abs=0.1)
    assert got["ffcm_within_sse_squared"] == pytest.approx(1.0, abs=0.03)


def test_cluster_means_keep_empty_clusters_in_place():
    X = np.array([[0.0], [2.0], [10.0]])
    c = np.array([[1.5], [9.0], [50.0]])
    means = cluster_means([local_statistics(X[:2], c), local_statistics(X[2:], c)], c)
    np.testing.assert_array_equal(means, [[1.0], [10.0], [50.0]])
