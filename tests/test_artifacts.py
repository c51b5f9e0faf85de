"""Run results on disk (fedcluster.server.artifacts) and the proto contract."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

import fedcluster.data.atomic
from fedcluster.proto import cluster_model_pb2 as pb
from fedcluster.server import artifacts
from fedcluster.server.artifacts import HISTORY_COLUMNS, from_proto, read_model, to_proto, write_history_csv, write_model, write_run
from fedcluster.server.presentation import format_result, result_to_dict
from fedcluster.results import ArtifactError, RoundRecord, RunResult

PROTO_DIR = Path(pb.__file__).parent


def make_result(**changes) -> RunResult:
    rng = np.random.default_rng(0)
    fields = dict(
        algorithm="dwf",
        settings={"algorithm": "dwf", "k": 3, "lr": 1.0, "init": "local-kmeans", "weighted": True,
                  "seed": 2**62 + 1, "tol": 1e-4, "n-init": 2},
        centroids=np.vstack([rng.normal(size=(2, 2)), [0.1, -0.0]]),
        counts=np.array([10.0, 2.5, 0.0]),
        score=1 / 3,
        n_points=5000,
        rounds=7,
        converged=True,
        best_restart=1,
        history=[
            RoundRecord(0, 1, math.nan, math.nan, 10, 3, 0, (1, 2, 3), "init"),
            RoundRecord(0, 2, 0.25, 12.5, 10, 9, 1, tuple(range(4, 13)), "train"),
            RoundRecord(1, 1, 1e-300, 2 / 3, 10, 0, 0, (), "train"),
        ],
        created=datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2))),
    )
    fields.update(changes)
    return RunResult(**fields)


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


# -- data classes -------------------------------------------------------------


def test_created_is_stored_in_utc_and_must_be_aware():
    result = make_result()
    assert result.created == datetime(2026, 1, 2, 1, 4, 5, 678901, tzinfo=timezone.utc)
    assert result.created.tzinfo == timezone.utc
    with pytest.raises(ValueError, match="time zone-aware"):
        make_result(created=datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"centroids": np.zeros(3)}, "shape"),
        ({"centroids": np.array([[np.nan, 0.0]]), "counts": [1.0]}, "NaN"),
        ({"counts": np.zeros(2)}, r"counts must have shape \(3,\)"),
        ({"settings": {"k": [1, 2]}}, "setting 'k'"),
        ({"settings": {"seed": 2**64}}, "64 bits"),
        ({"rounds": -1}, "rounds"),
        ({"algorithm": ""}, "algorithm"),
    ],
)
def test_run_result_is_validated(changes, message):
    with pytest.raises(ValueError, match=message):
        make_result(**changes)


def test_round_record_is_validated():
    with pytest.raises(ValueError, match="phase"):
        RoundRecord(0, 1, 0.0, 0.0, 1, 1, 0, (), "warmup")
    with pytest.raises(ValueError, match="clients_rejected"):
        RoundRecord(0, 1, 0.0, 0.0, 1, 1, -1)


def test_numpy_scalars_are_accepted_as_python_values():
    result = make_result(settings={"k": np.int64(3), "lr": np.float32(0.5)}, n_points=np.int64(9))
    assert result.settings == {"k": 3, "lr": 0.5} and type(result.settings["k"]) is int
    assert type(result.n_points) is int


# -- protobuf round trip ------------------------------------------------------


def assert_same(a: RunResult, b: RunResult) -> None:
    assert a.centroids.tobytes() == b.centroids.tobytes()  # bit-exact, -0.0 included
    assert a.counts.tobytes() == b.counts.tobytes()
    assert result_to_dict(a) == result_to_dict(b)
    types = [{key: type(value) for key, value in r.settings.items()} for r in (a, b)]
    assert types[0] == types[1]  # an int setting stays int, a float stays float
    assert a.created == b.created and a.version == b.version


def test_proto_round_trip_is_exact():
    result = make_result()
    assert_same(from_proto(to_proto(result)), result)


def test_model_file_round_trip_is_exact(tmp_path):
    result = make_result()
    path = write_model(result, tmp_path / "model.pb")
    assert_same(read_model(path), result)
    assert math.isnan(read_model(path).history[0].score)


def test_model_files_are_deterministic(tmp_path):
    result = make_result()
    a = write_model(result, tmp_path / "a.pb").read_bytes()
    b = write_model(result, tmp_path / "b.pb").read_bytes()
    assert a == b


def test_proto_layout():
    msg = to_proto(make_result())
    assert msg.n_clusters == 3 and msg.dimension == 2
    assert list(msg.centroids[4:]) == [0.1, -0.0]  # row-major
    assert msg.settings["k"].WhichOneof("kind") == "int_value"
    assert msg.settings["lr"].WhichOneof("kind") == "double_value"
    assert msg.history[1].phase == "train" and list(msg.history[1].participants) == [*range(4, 13)]


def test_generated_code_matches_the_proto(tmp_path):
    pytest.importorskip("grpc_tools")
    from fedcluster.proto.generate import generate

    for path in generate(tmp_path):
        assert path.read_bytes() == (PROTO_DIR / path.name).read_bytes(), f"{path.name} is stale"


def test_artifact_modules_import_neither_flower_nor_scikit_learn():
    code = (
        "import sys, fedcluster.data, fedcluster.server.artifacts\n"
        "bad = [m for m in ('flwr', 'sklearn') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- reading errors -----------------------------------------------------------


def test_missing_model_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"model file not found: .*nope\.pb"):
        read_model(tmp_path / "nope.pb")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"\xff\xff\xff\xff", "not a fedcluster model file"),
        (pb.RoundRecord(restart=1, round=2).SerializeToString(), "not a fedcluster model file"),
        (artifacts._HEADER[:7], "truncated model file: only 7 bytes"),
    ],
)
def test_corrupt_model_file(tmp_path, content, message):
    path = tmp_path / "model.pb"
    path.write_bytes(content)
    with pytest.raises(ArtifactError, match=message) as info:
        read_model(path)
    assert str(path) in str(info.value)


def test_inconsistent_model_is_rejected():
    msg = to_proto(make_result())
    del msg.counts[-1]
    with pytest.raises(ArtifactError, match="2 counts for k=3"):
        from_proto(msg)
    msg = to_proto(make_result())
    msg.history[0].phase = "bogus"
    with pytest.raises(ArtifactError, match="phase"):
        from_proto(msg)


# -- atomic writes ------------------------------------------------------------


def test_failed_serialisation_keeps_the_old_model(tmp_path, monkeypatch):
    path = write_model(make_result(), tmp_path / "model.pb")
    before = path.read_bytes()

    def broken(result):
        raise RuntimeError("serialisation failed")

    monkeypatch.setattr(artifacts, "to_proto", broken)
    with pytest.raises(RuntimeError, match="serialisation failed"):
        write_model(make_result(score=2.0), path)
    assert path.read_bytes() == before
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("writer", ["model", "history"])
def test_failure_mid_write_keeps_old_file_and_removes_temp_file(tmp_path, monkeypatch, writer):
    result = make_result()
    paths = write_run(result, tmp_path)
    before = paths[writer].read_bytes()
    seen = []

    def broken_fsync(fd):
        seen.extend(temp_files(tmp_path))  # the temporary file exists by now
        raise OSError("disk full")

    monkeypatch.setattr(fedcluster.data.atomic.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        if writer == "model":
            write_model(make_result(score=2.0), paths["model"])
        else:
            write_history_csv(result.history[:1], paths["history"])
    assert len(seen) == 1
    assert paths[writer].read_bytes() == before
    assert temp_files(tmp_path) == []


# -- history.csv, dict and text -------------------------------------------------


def test_write_run_creates_the_directory_and_both_files(tmp_path):
    paths = write_run(make_result(), tmp_path / "a" / "b")
    assert paths == {"model": tmp_path / "a/b/model.pb", "history": tmp_path / "a/b/history.csv"}
    assert all(p.is_file() for p in paths.values())


def test_history_csv_columns_and_values(tmp_path):
    path = write_history_csv(make_result().history, tmp_path / "history.csv")
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == HISTORY_COLUMNS == (
        "restart",
        "phase",
        "round",
        "movement",
        "score",
        "clients_sampled",
        "clients_answered",
        "clients_rejected",
        "participants",
        "epsilon",
    )
    assert rows[0]["phase"] == "init" and rows[0]["participants"] == "1;2;3"
    assert math.isnan(float(rows[0]["score"]))
    assert float(rows[2]["score"]) == 2 / 3 and float(rows[2]["movement"]) == 1e-300
    assert rows[1]["clients_answered"] == "9" and rows[2]["participants"] == ""


def test_result_to_dict_is_json_safe():
    result = make_result(score=math.nan)
    data = result_to_dict(result)
    text = json.dumps(data, allow_nan=False)
    assert data["score"] is None and data["history"][0]["movement"] is None
    assert data["created"] == "2026-01-02T01:04:05.678901+00:00"
    assert data["centroids"][2] == [0.1, -0.0]
    assert json.loads(text)["settings"]["seed"] == 2**62 + 1
    assert "centroids" not in result_to_dict(result, with_centroids=False)


def test_format_result_summarises_the_run():
    text = format_result(make_result(), last_rounds=2)
    for expected in ("dwf", "2026-01-02 01:04:05 UTC", "clusters (k)   3", "points         5000",
                     "converged      yes", "lr = 1.0", "k = 3", "history (last 2 of 3 rounds)"):
        assert expected in text
    assert "80.0%" in text  # cluster 0 holds 10 of 12.5
    assert "init" not in text.split("history")[1]  # only the last two rows


def test_a_run_summary_lists_only_the_settings_that_differ_from_the_defaults():
    from fedcluster.config import RunConfig
    from fedcluster.options import setting_defaults

    text = format_result(make_result(), defaults=setting_defaults(RunConfig))
    assert "settings other than the defaults (4 of 8)" in text
    listed = text.split("settings other than the defaults")[1].split("cluster counts")[0]
    # "weighted" is no setting of today's methods: without a default, it is listed.
    assert listed.split("\n")[1:-1] == ["  k = 3", "  n-init = 2", f"  seed = {2**62 + 1}",
                                        "  weighted = True"]
    assert "lr = " not in text and "init = 'local-kmeans'" not in text
    # The header names the method: the list does not repeat it.
    fkm = format_result(make_result(algorithm="fkm", settings={"algorithm": "fkm", "k": 15}),
                        defaults=setting_defaults(RunConfig))
    assert "settings other than the defaults (0 of 2)\ncluster counts" in fkm
    assert "\nsettings" not in format_result(make_result(), settings=False)
    assert "history (last 1 of 1 round)" in format_result(make_result(history=[
        RoundRecord(0, 1, 0.5, 1.0, 3, 3, 0, (1, 2, 3))]))


def test_a_summary_under_dp_names_the_epsilon_spent_and_the_data_bounds():
    settings = {"algorithm": "dwf", "k": 3, "dp": "central", "dp-epsilon": 1.0, "dp-delta": 1e-5,
                "data-bounds": "0:1e6", "secure-aggregation": True}
    history = [RoundRecord(0, r, 0.1, 1.0, 4, 4, 0, (1, 2, 3, 4), epsilon=0.4 * r)
               for r in (1, 2)]
    text = format_result(make_result(settings=settings, history=history))
    assert ("  privacy        central DP: epsilon 0.8 spent of 1.0 at delta 1e-05, data bounds "
            "0:1e6; secure aggregation\n") in text
    assert "privacy" not in format_result(make_result())


# -- integrity of model files (format version, checksum, required fields) ---------


def realistic_result() -> RunResult:
    """A model as `fedcluster simulate` writes it: DWF, k = 15 on S1-like data, 4 clients."""
    rng = np.random.default_rng(1)
    settings = {
        "algorithm": "dwf", "k": 15, "num-server-rounds": 100, "tol": 1e-4, "n-init": 1,
        "score": "exact", "seed": 0, "participation": 1.0, "clients-per-round": 0,
        "min-nodes": 4, "node-wait-timeout": 300.0, "round-timeout": 300.0,
        "min-answer-fraction": 0.5, "chunk-size": 4096, "device": "auto", "lr": 1.0,
        "momentum": 0.0, "local-steps": 1, "init": "local-kmeans", "k-prime": 0,
    }
    history = [RoundRecord(0, 0, math.nan, math.nan, 4, 4, 0, (11, 12, 13, 14), "init")]
    history += [RoundRecord(0, t, 10.0 ** -t, 1e9 / t, 4, 4, 0, (11, 12, 13, 14)) for t in (1, 2, 3)]
    return RunResult(algorithm="dwf", settings=settings,
                     centroids=rng.uniform(0, 1e6, size=(15, 2)),
                     counts=np.full(15, 5000 / 15).round(), score=8.9e8, n_points=5000, rounds=3,
                     converged=True, best_restart=0, history=history,
                     created=datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc))


def wrap(model: bytes, *, version: int = 1, digest: bytes | None = None) -> bytes:
    """A model file built from the documented layout, independently of encode_model."""
    envelope = pb.ModelFile(format="fedcluster-model", format_version=version,
                            sha256=hashlib.sha256(model).digest() if digest is None else digest,
                            model=model)
    return envelope.SerializeToString(deterministic=True)


def test_model_file_is_an_envelope_with_version_and_sha256(tmp_path):
    result = realistic_result()
    data = write_model(result, tmp_path / "model.pb").read_bytes()
    assert data.startswith(b"\n\x10fedcluster-model\x10\x01\x1a\x20")
    envelope = pb.ModelFile.FromString(data)
    assert envelope.format == artifacts.MODEL_FORMAT == "fedcluster-model"
    assert envelope.format_version == artifacts.MODEL_FORMAT_VERSION == 1
    assert envelope.sha256 == hashlib.sha256(envelope.model).digest()
    assert pb.ClusterModel.FromString(envelope.model) == to_proto(result)
    assert data == wrap(to_proto(result).SerializeToString(deterministic=True))
    assert_same(read_model(tmp_path / "model.pb"), result)


def test_every_truncation_of_a_model_file_is_refused(tmp_path):
    data = artifacts.encode_model(realistic_result())
    for n in range(1, len(data)):
        with pytest.raises(ArtifactError, match=r"^cut\.pb: (truncated|damaged) model file"):
            artifacts.decode_model(data[:n], source="cut.pb")
    # The original failure: `head -c N model.pb` at a boundary between fields of the model.
    model = to_proto(realistic_result()).SerializeToString(deterministic=True)
    offset = data.index(model)
    boundaries = [b for b in range(1, len(model)) if _decodes(model[:b])]
    assert len(boundaries) >= 30
    path = tmp_path / "cut.pb"
    for b in boundaries:
        path.write_bytes(data[: offset + b])
        with pytest.raises(ArtifactError, match=rf"^{re.escape(str(path))}: damaged model file"):
            read_model(path)


def test_a_cut_model_with_a_recomputed_checksum_is_still_refused():
    """Cut at each field boundary and re-wrapped with a valid checksum: the content checks refuse it."""
    model = to_proto(realistic_result()).SerializeToString(deterministic=True)
    boundaries = [b for b in range(1, len(model)) if _decodes(model[:b])]
    for b in boundaries:
        with pytest.raises(ArtifactError, match=r"^m\.pb: (incomplete|invalid|inconsistent|model has)"):
            artifacts.decode_model(wrap(model[:b]), source="m.pb")


def _decodes(data: bytes) -> bool:
    try:
        pb.ClusterModel.FromString(data)
    except Exception:  # noqa: BLE001 - DecodeError
        return False
    return True


def test_every_single_bit_flip_is_refused():
    data = artifacts.encode_model(realistic_result())
    for position in range(len(data) * 8):
        damaged = bytearray(data)
        damaged[position // 8] ^= 1 << (position % 8)
        with pytest.raises(ArtifactError, match=r"^m\.pb: "):
            artifacts.decode_model(bytes(damaged), source="m.pb")


def test_the_momentum_to_momenuum_flip_is_detected(tmp_path):
    path = write_model(realistic_result(), tmp_path / "model.pb")
    data = bytearray(path.read_bytes())
    at = data.index(b"momentum") + 5
    data[at] ^= ord("t") ^ ord("u")  # one bit: 0x74 -> 0x75
    path.write_bytes(bytes(data))
    assert b"momenuum" in path.read_bytes()
    with pytest.raises(ArtifactError, match=rf"^{re.escape(str(path))}: damaged model file: the SHA-256 of its "
                                            r"content \([0-9a-f]{16}\.\.\.\) does not match"):
        read_model(path)


def test_inspect_refuses_a_damaged_file_with_exit_2(tmp_path, capsys):
    from fedcluster.cli import main

    path = write_model(realistic_result(), tmp_path / "model.pb")
    cut = tmp_path / "cut.pb"
    cut.write_bytes(path.read_bytes()[:686])
    assert main(["inspect", str(cut)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fedcluster: error: {cut}: damaged model file") and err.count("\n") == 1
    assert main(["inspect", str(path)]) == 0


def test_a_model_of_the_format_before_the_envelope_gets_a_clear_message(tmp_path, capsys):
    from fedcluster.cli import main

    result = realistic_result()
    old = tmp_path / "old.pb"
    old.write_bytes(to_proto(result).SerializeToString(deterministic=True))  # the previous format
    with pytest.raises(ArtifactError) as info:
        read_model(old)
    message = str(info.value)
    assert message.startswith(f"{old}: written by an older fedcluster ({fedcluster.__version__}), "
                              "in the model format without a format version or checksum")
    assert "re-run the training" in message and "python -m fedcluster.server.artifacts upgrade" in message
    assert main(["inspect", str(old)]) == 2
    assert "written by an older fedcluster" in capsys.readouterr().err
    # The conversion it offers.
    new = artifacts.upgrade_model(old, tmp_path / "new.pb")
    assert_same(read_model(new), result)
    with pytest.raises(ArtifactError, match="already in model file format 1"):
        artifacts.upgrade_model(new)
    done = subprocess.run([sys.executable, "-m", "fedcluster.server.artifacts", "upgrade", str(old)],
                          capture_output=True, text=True, check=True)
    assert "wrote" in done.stdout and read_model(old).n_points == 5000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (lambda m: wrap(m, version=3), r"model file format version 3, which this fedcluster .* "
                                       r"cannot read \(it reads versions 1 and 2\): written by a newer"),
        (lambda m: wrap(m, version=2), "damaged model file: format version 2 without a "
                                       "standardisation"),
        (lambda m: wrap(m, version=0), "damaged model file: no format version"),
        (lambda m: wrap(m, digest=b""), "damaged model file: no checksum"),
        (lambda m: wrap(m, digest=bytes(31)), "damaged model file: a checksum of 31 bytes, not 32"),
        (lambda m: wrap(b""), "damaged model file: no model content"),
        (lambda m: wrap(m) + b"\x28\x01", "damaged model file: unexpected bytes"),
        (lambda m: wrap(m, digest=bytes(32)), "damaged model file: the SHA-256 of its content"),
        (lambda m: wrap(b"\xff\xff"), "invalid model: its content does not decode"),
    ],
)
def test_envelope_errors(tmp_path, data, message):
    path = tmp_path / "model.pb"
    path.write_bytes(data(to_proto(realistic_result()).SerializeToString(deterministic=True)))
    with pytest.raises(ArtifactError, match=rf"^{re.escape(str(path))}: {message}"):
        read_model(path)


def _del_setting(key):
    return lambda m: m.settings.pop(key)


def _set(field, value):
    return lambda m: setattr(m, field, value)


def _history(field, value, row=1):
    return lambda m: setattr(m.history[row], field, value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.ClearField("fedcluster_version"), "incomplete model: no fedcluster_version"),
        (lambda m: m.ClearField("algorithm"), "incomplete model: no algorithm"),
        (lambda m: m.ClearField("created"), "incomplete model: no creation time"),
        (_set("n_clusters", 0), "incomplete model: k = 0 clusters of dimension d = 2"),
        (_set("dimension", 0), "incomplete model: k = 15 clusters of dimension d = 0"),
        (lambda m: m.centroids.pop(), "model has 29 centroid values for k=15, d=2"),
        (lambda m: m.centroids.__setitem__(3, math.inf), "invalid model content: .*NaN or infinite"),
        (lambda m: m.counts.pop(), "model has 14 counts for k=15"),
        (lambda m: m.counts.__setitem__(0, -1.0), "invalid model: counts must be finite and >= 0"),
        (lambda m: m.counts.__setitem__(0, math.nan), "invalid model: counts must be finite"),
        (_set("n_points", 0), "invalid model: n_points is 0"),
        (_set("score", -1.0), "invalid model: score -1.0 must be >= 0"),
        (_set("score", math.inf), "invalid model: score inf must be >= 0"),
        (lambda m: m.ClearField("settings"), "incomplete model: no settings"),
        (_del_setting("algorithm"), "incomplete model: settings have no 'algorithm'"),
        (_del_setting("k"), "incomplete model: settings have no 'k'"),
        (lambda m: m.settings["algorithm"].CopyFrom(pb.SettingValue(string_value="ewf")),
         "inconsistent model: setting algorithm = 'ewf', but the model's algorithm is 'dwf'"),
        (lambda m: m.settings["k"].CopyFrom(pb.SettingValue(int_value=16)),
         "inconsistent model: 15 centroids, but setting k = 16"),
        (lambda m: m.settings["k"].CopyFrom(pb.SettingValue(string_value="15")),
         "invalid model: setting k = '15' is not an integer >= 1"),
        (lambda m: m.settings["score"].CopyFrom(pb.SettingValue(string_value="best")),
         "invalid model: setting score = 'best' is not one of 'exact', 'client-mean'"),
        (lambda m: m.settings["momentum"].Clear(), "setting 'momentum' has no value"),
        (_set("best_restart", 1), "inconsistent model: best restart 1, but n-init = 1"),
        (_history("phase", "warmup"), "invalid model content: RoundRecord.phase"),
        (lambda m: (m.settings["n-init"].CopyFrom(pb.SettingValue(int_value=2)),
                    setattr(m.history[0], "restart", 1)),
         r"invalid model: history row 1 \(restart 0, round 1\): restarts out of order \(after restart 1\)"),
        (_history("restart", 3, row=3), r"invalid model: history row 3 .*: restart index beyond n-init = 1"),
        (_history("movement", -0.5), r"invalid model: history row 1 .*: movement -0.5 must be >= 0 \(or NaN\)"),
        (_history("score", math.inf), r"invalid model: history row 1 .*: score inf must be >= 0"),
        (_history("clients_rejected", 1), "invalid model: .*4 answered and 1 rejected, more than the 4 clients sampled"),
        (lambda m: m.history[1].participants.append(15), "invalid model: .*are not 4 distinct node ids"),
        (lambda m: m.history[1].participants.__setitem__(0, 12), "invalid model: .*are not 4 distinct node ids"),
        (lambda m: m.history[1].rejections.append("node 3: made up"),
         "invalid model: .*1 rejection reasons for 0 rejected answers"),
    ],
)
def test_incomplete_or_inconsistent_models_are_refused(tmp_path, change, message):
    msg = to_proto(realistic_result())
    change(msg)
    path = tmp_path / "model.pb"
    path.write_bytes(wrap(msg.SerializeToString(deterministic=True)))  # a valid checksum
    with pytest.raises(ArtifactError, match=rf"^{re.escape(str(path))}: {message}"):
        read_model(path)


def test_feca_and_mavg_may_have_fewer_centroids_than_k(tmp_path):
    for algorithm, settings in (("feca", {"k": 20}), ("mavg", {"k": 10, "k-prime": 15})):
        result = realistic_result()
        result.algorithm = algorithm
        result.settings.update(algorithm=algorithm, **settings)
        assert read_model(write_model(result, tmp_path / "m.pb")).n_clusters == 15
    result.settings.update({"k-prime": 14})
    with pytest.raises(ArtifactError, match="15 centroids, more than mavg gives for k = 10 "
                                            r"\(at most 14\)"):
        write_model(result, tmp_path / "m.pb")


def test_writing_an_invalid_model_fails_and_keeps_the_old_files(tmp_path):
    paths = write_run(realistic_result(), tmp_path)
    before = {name: p.read_bytes() for name, p in paths.items()}
    bad = realistic_result()
    del bad.settings["algorithm"]
    with pytest.raises(ArtifactError, match="settings have no 'algorithm'"):
        write_run(bad, tmp_path)
    with pytest.raises(ArtifactError, match="settings have no 'algorithm'"):
        write_model(bad, paths["model"])
    assert {name: p.read_bytes() for name, p in paths.items()} == before
    assert temp_files(tmp_path) == []


def test_write_run_writes_the_model_last(tmp_path, monkeypatch):
    paths = write_run(make_result(), tmp_path)
    before = paths["model"].read_bytes()

    def broken(history, path):
        raise OSError("disk full")

    monkeypatch.setattr(artifacts, "write_history_csv", broken)
    with pytest.raises(OSError, match="disk full"):
        write_run(make_result(score=2.0), tmp_path)
    assert paths["model"].read_bytes() == before  # no new model without its history
