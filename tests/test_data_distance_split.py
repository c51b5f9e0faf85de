"""The spatial split 'distance:BETA' of Garst & Reinders (eq. 2) in fedcluster.data.partition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import grid_data

from fedcluster.config import RunConfig
from fedcluster.data import Split, parse_split, partition_indices
from fedcluster.data.partition import _claims


def test_parse_and_print_distance_splits():
    assert parse_split("distance:1") == Split("distance", beta=1.0)
    assert parse_split(" distance:1e-1 ") == Split("distance", beta=0.1)
    assert str(Split("distance", beta=10.0)) == "distance:10.0"
    assert parse_split(str(Split("distance", beta=0.25))) == Split("distance", beta=0.25)
    # The other forms still read as before.
    assert parse_split("dirichlet:0.3") == Split("dirichlet", 0.3)
    assert parse_split("iid") == Split("iid")


@pytest.mark.parametrize("spec", ["distance", "distance:", "distance:0", "distance:-2",
                                  "distance:nan", "distance:inf", "distance:x", "dist:1"])
def test_bad_distance_specs_name_the_accepted_forms(spec):
    with pytest.raises(ValueError, match=r"'distance:BETA' with BETA > 0"):
        parse_split(spec)


def test_split_checks_which_parameter_it_takes():
    with pytest.raises(ValueError, match="distance beta must be finite and > 0"):
        Split("distance")
    with pytest.raises(ValueError, match="the distance split takes no alpha"):
        Split("distance", alpha=1.0, beta=1.0)
    with pytest.raises(ValueError, match="the dirichlet split takes no beta"):
        Split("dirichlet", 0.3, beta=1.0)
    with pytest.raises(ValueError, match="the iid split takes no beta"):
        Split("iid", beta=1.0)


def test_the_run_config_accepts_a_distance_split():
    assert RunConfig.from_mapping({"split": "distance:0.1"}).split == "distance:0.1"


def test_claims_follow_eq_2_and_the_tie_rules():
    # Clients at 0 and 4 on a line, every row at x = 1 (d = 1 and 3), beta = 1:
    # P_A = 1 - e^-1 = 0.6321, P_B = 1 - e^(-1/3) = 0.2835, drawn independently.
    # B keeps a row if only B claims it, or if both do and the coin picks B:
    # P_B (1 - P_A) + P_A P_B / 2 = 0.1043 + 0.0896 = 0.1939. A row nobody claims
    # (probability (1 - P_A)(1 - P_B) = 0.2636) goes to the nearer client, A.
    p_a, p_b = 1 - math.exp(-1), 1 - math.exp(-1 / 3)
    expected_b = p_b * (1 - p_a) + p_a * p_b / 2
    assert expected_b == pytest.approx(0.1939, abs=1e-4)
    n = 40_000
    owners = _claims(np.ones((n, 1)), np.array([[0.0], [4.0]]), 1.0, np.random.default_rng(0))
    # Standard error sqrt(0.194 * 0.806 / n) = 0.002; allow five.
    assert np.mean(owners == 1) == pytest.approx(expected_b, abs=0.01)


def test_a_row_on_a_client_site_is_claimed_by_it():
    # d = 0 gives P = 1 - exp(-inf) = 1; the other client (d = 10, beta = 1e-9) almost never claims.
    owners = _claims(np.zeros((1000, 1)), np.array([[10.0], [0.0]]), 1e-9, np.random.default_rng(1))
    assert np.all(owners == 1)


def test_distance_partition_is_complete_and_deterministic():
    X, _, _ = grid_data()
    parts = partition_indices(800, 4, "distance:1", points=X, seed=3)
    assert len(parts) == 4 and all(len(p) >= 1 and p.dtype == np.int64 for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(800))
    again = partition_indices(800, 4, Split("distance", beta=1.0), points=X, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = partition_indices(800, 4, "distance:1", points=X, seed=4)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_tiny_beta_gives_each_row_to_its_nearest_client():
    # Nobody claims anything, so on a line every client gets an interval.
    X = np.linspace(0.0, 1.0, 300)[:, None]
    for seed in range(5):
        for part in partition_indices(300, 3, "distance:1e-12", points=X, seed=seed):
            assert part[-1] - part[0] + 1 == len(part)


def test_huge_beta_gives_each_row_to_a_random_client():
    # Every client claims every row; the random tie rule splits them evenly.
    X, labels, _ = grid_data()
    parts = partition_indices(800, 2, "distance:1e9", points=X, seed=0)
    assert abs(len(parts[0]) - 400) < 60  # 4 standard deviations of Binomial(800, 1/2)
    assert all(len(np.unique(labels[p])) == 16 for p in parts)


def test_smaller_beta_gives_clients_fewer_clusters():
    # Garst's Fig. 1 (c)-(e): beta = 0.1 splits the grid by location, beta = 10 mixes it.
    X, labels, _ = grid_data()

    def mean_clusters_per_client(beta):
        return np.mean([
            np.mean([np.count_nonzero(np.bincount(labels[p], minlength=16) >= 5) for p in
                     partition_indices(800, 4, f"distance:{beta}", points=X, seed=s)])
            for s in range(5)
        ])

    few, some, many = (mean_clusters_per_client(b) for b in (0.1, 1, 10))
    assert few < some < many
    assert few < 9 and many > 13


def test_distance_split_needs_matching_points():
    X, _, _ = grid_data()
    with pytest.raises(ValueError, match="needs the points"):
        partition_indices(800, 4, "distance:1")
    with pytest.raises(ValueError, match="expected 800 points, got 799"):
        partition_indices(800, 4, "distance:1", points=X[:-1])


def test_distance_split_gives_up_with_a_clear_error():
    # Nobody claims a row (tiny beta), so equal rows go to one nearest client: two
    # places cannot feed three clients, whatever the placement.
    with pytest.raises(ValueError, match="gave each client at least one row"):
        partition_indices(3, 3, "distance:1e-12", points=np.array([[0.0], [0.0], [1.0]]))
