"""How far one poisoned client of ten moves DWF, with and without the bounded-influence options.

S1, 10 IID clients, k = 15, DWF (``fedcluster.methods.dwf.strategy.WeightedFederatedKMeans``)
over the in-memory federation, whose clients answer as the real ClientApp does
(as ``fedcluster bench`` runs a cell). Client 9 is the poisoned one:

* ``clean``: honest (the baseline of every option);
* ``units``: its rows times 1e6 (the same distribution in other units);
* ``copies``: 1e6 copies of one far point, (1e7, 1e7), instead of its rows (its
  own privacy floor refuses every reply: a centroid would equal a row);
* ``mass``: the same 1e6 points jittered by N(0, 1), which the floor lets out;
* ``counts``: its rows, but every reply declares 1000 times its rows, counts and
  squared distances (centroids honest: only weight and score are inflated);
* ``shift``: as ``counts``, and every round's centroids moved by (3e4, 3e4),
  about one cluster radius of S1;
* ``far``: as ``counts``, and every round's centroids sent at (1e7, 1e7).

Options: the paper's weighted mean, ``max-client-share 0.3``, ``aggregation
trimmed-mean`` with ``trim-fraction 0.2``, ``aggregation median``. Starts: the
default ``local-kmeans`` (which the client's replies reach too) and a fixed
honest start (15 S1 rows, one near each true centre, as the tests use), which
isolates the aggregation.

Metrics: the score of the honest clients' data (mean squared distance of
their 4500 points to the nearest final centroid), the distance of the final
centroids to S1's true centres (``fedcluster.metrics.centre_distance``), the
score the federation reports (over what every client declares), rounds, and
whether the spread warning named the poisoned node.

    python benchmarks/poisoning.py            # prints the tables of BENCHMARKS.md
    python benchmarks/poisoning.py --json out.json

The package imports nothing from here; the tests import the lying client
(:func:`lying_client`, and :func:`lying_app`, the same lie as a Flower ClientApp).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time

for _key, _value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
                     "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1", "UV_OFFLINE": "1"}.items():
    os.environ.setdefault(_key, _value)

import numpy as np  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402

from fedcluster.client.app import build_client_app  # noqa: E402
from fedcluster.client.respond import respond  # noqa: E402
from fedcluster.data import load_dataset, partition_indices  # noqa: E402
from fedcluster.federation.memory import InMemoryFederation  # noqa: E402
from fedcluster.messages import ClientSummary  # noqa: E402
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans  # noqa: E402
from fedcluster.metrics import centre_distance  # noqa: E402
from fedcluster.protocol import decode_reply, make_reply, reply_sampling_key  # noqa: E402

CLIENTS = 10
POISONED = CLIENTS - 1
K = 15
INFLATE = 1000
FAR = 1e7
SHIFT = 3e4
#: One S1 row near each true centre: the honest fixed start.
START_ROWS = [4, 400, 700, 1000, 1400, 1700, 2000, 2400, 2700, 3000, 3400, 3700, 4000, 4400, 4700]

ATTACKS = ("clean", "units", "copies", "mass", "counts", "shift", "far")
OPTIONS = {
    "mean (paper)": {},
    "max-client-share 0.3": {"max_client_share": 0.3},
    "trimmed-mean 0.2": {"aggregation": "trimmed-mean", "trim_fraction": 0.2},
    "median": {"aggregation": "median"},
}
STARTS = ("local-kmeans", "honest start")


def lie(summary: ClientSummary, kind: str, mode: str) -> ClientSummary:
    """An honest reply to a request of ``kind``, altered as ``mode`` says.

    Every mode (``counts``, ``shift``, ``far``) declares ``INFLATE`` times the
    rows, counts and squared distances; ``shift`` and ``far`` also move the
    centroids of every round's reply (by ``SHIFT``, or to ``FAR``). An empty
    mode leaves the reply as it is.
    """
    if not mode:
        return summary
    change: dict = {"n": int(summary.n) * INFLATE, "sse": float(summary.sse) * INFLATE}
    if summary.counts is not None:
        change["counts"] = np.asarray(summary.counts, dtype=np.float64) * INFLATE
    if kind.startswith("train") and summary.centroids is not None:
        centroids = np.asarray(summary.centroids, dtype=np.float64)
        moved = centroids + SHIFT if mode == "shift" else np.full_like(centroids, FAR) \
            if mode == "far" else centroids
        change["centroids"] = np.ascontiguousarray(moved)
    return dataclasses.replace(summary, **change)


def lying_client(X, request, node_config) -> ClientSummary:
    """A responder of :class:`~fedcluster.federation.memory.InMemoryFederation`.

    The real answer (:func:`~fedcluster.client.respond.respond`), altered by
    :func:`lie` as ``node_config['lie']`` (counts, shift, far) says.
    """
    return lie(respond(X, request, node_config), request.kind, node_config.get("lie", ""))


def lying_app() -> ClientApp:
    """The real ClientApp; ``node_config['lie']`` alters its replies as :func:`lying_client` does."""
    real = build_client_app()
    app = ClientApp()

    def serve(msg, context):
        reply = real(msg, context)
        mode = context.node_config.get("lie", "")
        if not mode or reply.has_error():
            return reply
        summary = lie(decode_reply(reply.content), msg.metadata.message_type, mode)
        return make_reply(msg, summary, sampling_key=reply_sampling_key(reply.content))

    app.train()(serve)
    app.evaluate()(serve)
    app.query("bounds")(serve)
    app.query("local_kmeans")(serve)
    return app


class Warnings(logging.Handler):
    """Collects the spread warnings of one run."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        if "other units" in record.getMessage():
            self.lines.append(record.getMessage())


def one_run(X: np.ndarray, parts: list[np.ndarray], attack: str, options: dict, start: str
            ) -> dict:
    rows = [X[p] for p in parts]
    if attack == "units":
        rows[POISONED] = rows[POISONED] * 1e6
    elif attack == "copies":
        rows[POISONED] = np.full((1_000_000, X.shape[1]), FAR)
    elif attack == "mass":
        rows[POISONED] = FAR + np.random.default_rng(0).standard_normal((1_000_000, X.shape[1]))
    honest = np.concatenate(rows[:POISONED])
    init = "local-kmeans"
    strategy_options = dict(options)
    started = time.perf_counter()
    handler = Warnings()
    logging.getLogger("flwr").addHandler(handler)
    try:
        configs = [{} for _ in rows]
        if attack in ("counts", "shift", "far"):
            configs[POISONED]["lie"] = attack
        federation = InMemoryFederation(rows, node_configs=configs,
                                        responders={POISONED: lying_client})
        strategy = WeightedFederatedKMeans(K, init=init, seed=0, **strategy_options)
        if start == "honest start":
            strategy.explicit_start = X[START_ROWS].astype(np.float64)
        result = strategy.fit(federation)
    finally:
        logging.getLogger("flwr").removeHandler(handler)
    wall = time.perf_counter() - started
    C = result.centroids
    d2 = ((honest[:, None, :] - C[None, :, :]) ** 2).sum(axis=2).min(axis=1)
    poisoned_node = POISONED  # an in-memory client's node id is its position
    warned = sorted({int(line.split("node ")[1].split(":")[0]) for line in handler.lines})
    return {
        "attack": attack,
        "option": next(name for name, o in OPTIONS.items() if o == options),
        "start": start,
        "honest_score": float(d2.mean()),
        "centre_distance": float(centre_distance(C, TRUE_CENTRES)),
        "reported_score": float(result.score),
        "rounds": result.rounds,
        "converged": result.converged,
        "warned_poisoned": poisoned_node in warned,
        "warned_honest": len([n for n in warned if n != poisoned_node]),
        "warnings": handler.lines,
        "wall_s": round(wall, 2),
    }


def table(results: list[dict], start: str) -> str:
    lines = [f"Start: {start}. Each cell: score of the honest clients' data (/ 1e9) / distance "
             "to the true centres (/ 1e4).", ""]
    head = "| client 9 | " + " | ".join(OPTIONS) + " |"
    lines += [head, "|---" * (len(OPTIONS) + 1) + "|"]
    for attack in ATTACKS:
        cells = []
        for option in OPTIONS:
            [r] = [r for r in results if (r["attack"], r["option"], r["start"]) == (attack, option, start)]
            cells.append(f"{r['honest_score'] / 1e9:.3g} / {r['centre_distance'] / 1e4:.3g}")
        lines.append(f"| {attack} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write every run's figures to this file")
    args = parser.parse_args(argv)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    data = load_dataset("s1")
    global TRUE_CENTRES
    TRUE_CENTRES = data.true_centers
    parts = partition_indices(len(data.X), CLIENTS, "iid", seed=0)
    results = []
    for start in STARTS:
        for attack in ATTACKS:
            for options in OPTIONS.values():
                results.append(one_run(data.X, parts, attack, options, start))
                r = results[-1]
                print(f"{start:13s} {attack:7s} {r['option']:21s} honest {r['honest_score']:.4g} "
                      f"centres {r['centre_distance']:.4g} reported {r['reported_score']:.4g} "
                      f"rounds {r['rounds']} warned poisoned {r['warned_poisoned']} "
                      f"honest {r['warned_honest']} ({r['wall_s']} s)", file=sys.stderr, flush=True)
    for start in STARTS:
        print(table(results, start))
        print()
    print("Reported score (over what every client declares) / score of the honest clients' "
          "data, both / 1e9, local-kmeans start:")
    print()
    print("| client 9 | " + " | ".join(OPTIONS) + " |")
    print("|---" * (len(OPTIONS) + 1) + "|")
    for attack in ATTACKS:
        cells = [f"{r['reported_score'] / 1e9:.3g} / {r['honest_score'] / 1e9:.3g}" for r in results
                 if r["attack"] == attack and r["start"] == "local-kmeans"]
        print(f"| {attack} | " + " | ".join(cells) + " |")
    print()
    print("Spread warning (runs that named client 9 / runs that named an honest client):")
    for start in STARTS:
        for attack in ATTACKS:
            runs = [r for r in results if r["attack"] == attack and r["start"] == start]
            print(f"  {start}, {attack}: {sum(r['warned_poisoned'] for r in runs)} / "
                  f"{sum(r['warned_honest'] > 0 for r in runs)} of {len(runs)}"
                  + (f"  ({runs[0]['warnings'][0]})" if runs[0]["warnings"] else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


TRUE_CENTRES = None

if __name__ == "__main__":
    sys.exit(main())
