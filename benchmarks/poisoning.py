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

``--every-method`` measures instead issue 24's table: every method of
:data:`fedcluster.methods.METHODS` at its defaults (k = 15, seed 0) but
DeepFeCA (it trains a network per client and clusters its features: minutes
per run on S1 instead of a second, and its replies carry network weights that
none of these lies touches), on S1 split IID in 5 and in 10, with 1 liar of 5
and 1, 2, 3 of 10 (the first clients) telling each lie of :data:`LIES` in
every reply from the first. Per cell: the pooled SSE of all S1 rows to the
final centroids over that of the clean run (same method, split and start),
and the relative error of the reported score (``RunResult.score``) against
the true pooled score (SSE of all rows / 5000). A liar's rows are honest: only
its replies lie, so "pooled" includes them.

    python benchmarks/poisoning.py --every-method > benchmarks/results/poisoning/every-method.md

The package imports nothing from here; the tests import the lying client
(:func:`lying_client`, and :func:`lying_app`, the same lie as a Flower ClientApp).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
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
from fedcluster.config import RunConfig  # noqa: E402
from fedcluster.data import load_dataset, partition_indices  # noqa: E402
from fedcluster.client.memory import InMemoryFederation  # noqa: E402
from fedcluster.logs import colour_only_on_a_terminal  # noqa: E402
from fedcluster.messages import ClientSummary  # noqa: E402
from fedcluster.config import build_strategy
from fedcluster.methods import METHODS  # noqa: E402
from fedcluster.methods.dwf.strategy import WeightedFederatedKMeans  # noqa: E402
from fedcluster.metrics import centre_distance  # noqa: E402
from fedcluster.options import RoundOptions  # noqa: E402
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
    """A responder of :class:`~fedcluster.client.memory.InMemoryFederation`.

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


# -- issue 24: every method, every lie ------------------------------------------------------

#: The lies of issue 24's table, by name: what the liar's every reply carries.
LIES = {
    "centroids 1e99": "all its local centroids at 1e99 (inside the +-1e100 value bound)",
    "centroids 1e7": "all its local centroids at 1e7 (S1 lies in [0, 1e6])",
    "counts x1e9": "row count, counts and fuzzy weights x1e9, its first centroid at (5e6, 5e6)",
    "radii x1e99": "FeCA radii x1e99",
    "bounds 1e99": "random start: bounds -1e99 .. +1e99",
}
#: (clients, liars) of each column.
LIAR_SETS = ((5, 1), (10, 1), (10, 2), (10, 3))
#: Every method but DeepFeCA (see the module docstring).
EVERY_METHOD = tuple(name for name in METHODS if name != "deepfeca")


def told(summary: ClientSummary, request, node_config) -> ClientSummary:
    """A responder's honest reply altered by the issue-24 lie ``node_config['lie24']``.

    A lie alters only the fields it names; a reply without them goes out as it
    is (the lie then changes nothing, which :func:`every_method_run` reports).
    """
    lie24 = node_config["lie24"]
    change: dict = {}
    if lie24 in ("centroids 1e99", "centroids 1e7") and summary.centroids is not None:
        change["centroids"] = np.full_like(summary.centroids, float(lie24.split()[1]))
    elif lie24 == "counts x1e9":
        change["n"] = int(summary.n) * 10**9
        for name in ("counts", "weights"):
            if getattr(summary, name) is not None:
                change[name] = np.asarray(getattr(summary, name), dtype=np.float64) * 1e9
        if summary.centroids is not None and len(summary.centroids):
            moved = np.array(summary.centroids, dtype=np.float64)
            moved[0] = 5e6
            change["centroids"] = moved
    elif lie24 == "radii x1e99" and summary.radii is not None:
        change["radii"] = np.asarray(summary.radii, dtype=np.float64) * 1e99
    elif lie24 == "bounds 1e99" and summary.low is not None:
        change["low"] = np.full_like(summary.low, -1e99)
        change["high"] = np.full_like(summary.high, 1e99)
    if change:
        node_config["lied"] = True
    return dataclasses.replace(summary, **change)


def told_mod(lie24: str, liars: int = 1):
    """A Flower client mod: the simulated clients of partition id below ``liars`` tell ``lie24``.

    The real ClientApp answers; the mod alters the decoded summary by
    :func:`told` and encodes it again (the tests run it in a Ray simulation).
    """

    def mod(msg, context, call_next):
        reply = call_next(msg, context)
        if reply.has_error() or int(context.node_config.get("partition-id", liars)) >= liars:
            return reply
        summary = told(decode_reply(reply.content), None, {"lie24": lie24})
        return make_reply(msg, summary, sampling_key=reply_sampling_key(reply.content))

    return mod


def every_method_run(X: np.ndarray, parts: list[np.ndarray], method: str, lie24: str,
                     liars: int) -> dict:
    """One run of ``method`` at its defaults, the first ``liars`` clients telling ``lie24``.

    ``bounds 1e99`` (and its clean baseline, ``liars`` 0) runs with the random
    start, the only start that asks for bounds, on the methods that take
    ``init``; the other lies with each method's default start.
    """
    mapping = {"algorithm": method, "k": K, "seed": 0}
    if lie24 == "bounds 1e99":
        mapping["init"] = "random"
    configs = [{"lie24": lie24} if i < liars else {} for i in range(len(parts))]
    federation = InMemoryFederation([X[p] for p in parts], node_configs=configs)
    for i in range(liars):  # the real client, with its session (the stateful methods need it)
        federation.responders[i] = lambda X, r, c, i=i: told(
            respond(X, r, c, federation.sessions[i], i), r, c)
    started = time.perf_counter()
    try:
        result = build_strategy(RunConfig.from_mapping(mapping)).fit(federation)
    except Exception as exc:  # noqa: BLE001 - a failed run is a figure too
        return {"method": method, "lie": lie24, "clients": len(parts), "liars": liars,
                "error": f"{type(exc).__name__}: {exc}"}
    C = result.centroids
    d2 = np.min([((X - c) ** 2).sum(axis=1) for c in C], axis=0)
    return {"method": method, "lie": lie24, "clients": len(parts), "liars": liars, "error": "",
            "lied": any(c.get("lied") for c in federation.node_configs),
            "pooled_sse": float(d2.sum()), "true_score": float(d2.mean()),
            "reported_score": float(result.score), "n_points": int(result.n_points),
            "wall_s": round(time.perf_counter() - started, 2)}


def random_start(method: str) -> bool:
    return issubclass(METHODS[method].strategy.Options, RoundOptions)


def every_method(X: np.ndarray, json_path: str | None) -> None:
    """Issue 24's table: every method x lie x liar set (see the module docstring)."""
    splits = {n: partition_indices(len(X), n, "iid", seed=0) for n in {c for c, _ in LIAR_SETS}}
    runs = []
    for method in EVERY_METHOD:
        for lie24 in LIES:
            if lie24 == "bounds 1e99" and not random_start(method):
                continue
            for clients in splits:
                runs.append(every_method_run(X, splits[clients], method, lie24, 0))
                base = runs[-1]
                for n, liars in LIAR_SETS:
                    if n != clients:
                        continue
                    runs.append(every_method_run(X, splits[clients], method, lie24, liars))
                    run = runs[-1]
                    run["clean_sse"] = base.get("pooled_sse", math.nan)
                    print(f"{method:9s} {lie24:15s} {liars}/{clients} "
                          + (run["error"] or f"ratio {run['pooled_sse'] / run['clean_sse']:.3g} "
                             f"reported {run['reported_score']:.4g} true {run['true_score']:.4g} "
                             f"n {run['n_points']} lied {run['lied']} ({run['wall_s']} s)"),
                          file=sys.stderr, flush=True)
    print("Pooled SSE / clean run; reported score's relative error to the true pooled score. "
          "S1, IID, k = 15, every method at its defaults (bounds 1e99: random start), "
          "the first clients lying from their first reply. '-': the method's replies carry no "
          "field the lie alters.")
    print()
    heads = [f"{liars} of {clients}" for clients, liars in LIAR_SETS]
    print("| method | lie | " + " | ".join(heads) + " |")
    print("|---" * (len(heads) + 2) + "|")
    for method in EVERY_METHOD:
        for lie24 in LIES:
            cells = []
            for clients, liars in LIAR_SETS:
                found = [r for r in runs if (r["method"], r["lie"], r["clients"], r["liars"])
                         == (method, lie24, clients, liars)]
                if not found:
                    continue
                r = found[0]
                if r["error"]:
                    cells.append("failed: " + r["error"][:60].replace("|", "/"))
                elif not r["lied"]:
                    cells.append("-")
                else:
                    error = abs(r["reported_score"] - r["true_score"]) / r["true_score"]
                    cells.append(f"{r['pooled_sse'] / r['clean_sse']:.3g} / {error:.3g}")
            if cells:
                print(f"| {method} | {lie24} | " + " | ".join(cells) + " |")
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(runs, f, indent=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write every run's figures to this file")
    parser.add_argument("--every-method", action="store_true",
                        help="issue 24's table: every method and lie (see the module docstring)")
    args = parser.parse_args(argv)
    logging.getLogger("flwr").setLevel(logging.WARNING)
    colour_only_on_a_terminal()  # the tables are usually redirected to a file
    if args.every_method:
        every_method(load_dataset("s1").X, args.json)
        return 0
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
