"""Every command of README.md has a test, and the slow tests run them as a user would.

README.md's fenced ``bash`` blocks are parsed into commands (backslash
continuations joined, comments dropped, ``&&`` chains split, heredocs kept
with their command) and its ``python`` block into one command. :data:`TABLE`
names, for each command, the test that runs it and what that test checks. The
fast test :func:`test_every_readme_command_has_a_test` fails when a README
command has no table entry (or more than one), when an entry's command is no
longer in the README, or when the test an entry names does not exist.

The slow tests execute the commands from a temporary working directory, as
subprocesses, with the project's ``fedcluster`` and Flower's commands from this
environment, ``HOME`` and ``FLWR_HOME`` in the temporary directory and Flower
offline:

* ``fedcluster simulate ...``: exit 0; every request round (``history.csv``)
  was answered by every client it asked (``clients_answered ==
  clients_sampled > 0``, nothing rejected) and asked as many clients as the
  options say; participants are Flower's own node ids; an iterative method's
  centroids moved in the first round, a one-shot method (README's method
  table) ran one round and said so; one log line per round; and the figures the
  README states (:data:`CLAIMS`) hold. The README's ``fedcluster inspect``
  commands run after each simulate command of their block.
* ``fedcluster bench benchmarks/X.toml``: the committed ``runs.jsonl`` less a
  few runs (chosen with a fixed seed) is put where the command writes; the
  command must run exactly the missing runs again and reproduce their
  committed metrics.
* the deployment block: SuperLink, SuperNodes, the connection and the
  submission, as written, on loopback with the README's default ports.
* the docker compose commands run in ``tests/test_docker.py`` (named in the
  table, not run here again).
"""

from __future__ import annotations

import ast
import csv
import json
import math
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from fedcluster.simulation import FLOWER_OFFLINE_ENV
from harness.localdeploy import stop_group

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
README = REPO / "README.md"
BIN = Path(sys.executable).parent
THIS = Path(__file__).name
#: Node ids Flower draws are random uint64 values; a simulation's partition
#: ids (0, 1, ...) or made-up ids (100, 101, ...) are far below this.
SMALLEST_FLOWER_ID = 2**20


# -- README parsing -----------------------------------------------------------------------

@dataclass(frozen=True)
class Command:
    """One command of a README code block.

    Attributes
    ----------
    text : str
        The command, continuations joined, comment dropped, whitespace collapsed
        (for a heredoc its first line only; for the python block the whole code).
    script : str
        What a shell (or Python) runs: ``text`` plus the heredoc's lines.
    section : str
        The heading of the README section the block is in.
    block : int
        Index of the code block in the README (0-based).
    lang : str
        ``bash`` or ``python``.
    line : int
        Line number of the command in README.md.
    chain : str
        The whole logical line the command came from (before ``&&`` was split).
    """

    text: str
    script: str
    section: str
    block: int
    lang: str
    line: int
    chain: str

    def __str__(self) -> str:
        return f"README.md:{self.line} [{self.section}] {self.text}"


def _unquoted(text: str):
    """Yield (index, char, quoted) for each character of a shell line."""
    quote = None
    escaped = False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
            yield i, char, True
            continue
        if char == "\\" and quote != "'":
            escaped = True
            yield i, char, quote is not None
            continue
        if quote is None and char in "'\"":
            quote = char
            yield i, char, True
            continue
        if quote is not None and char == quote:
            quote = None
            yield i, char, True
            continue
        yield i, char, quote is not None


def strip_comment(line: str) -> str:
    """``line`` without a trailing shell comment (a ``#`` outside quotes after a blank)."""
    for i, char, quoted in _unquoted(line):
        if char == "#" and not quoted and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def split_and(line: str) -> list[str]:
    """Split a shell line at ``&&`` outside quotes."""
    parts, start = [], 0
    for i, char, quoted in _unquoted(line):
        if char == "&" and not quoted and line[i + 1:i + 2] == "&" and i >= start:
            parts.append(line[start:i].strip())
            start = i + 2
    parts.append(line[start:].strip())
    return [p for p in parts if p]


HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")


def parse_readme(text: str) -> list[Command]:
    """Every command of every ``bash`` block, and each ``python`` block, in README order."""
    commands: list[Command] = []
    lines = text.splitlines()
    section = ""
    block = -1
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            lang = line[3:].strip()
            block += 1
            start = i + 1
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            body = lines[start:i]
            i += 1  # the closing fence
            if lang == "python":
                code = "\n".join(body)
                commands.append(Command(code.strip(), code, section, block, lang, start + 1, code))
            elif lang in ("bash", "sh", "shell", "console"):
                commands.extend(_bash_commands(body, start, section, block))
            continue
        if heading := re.match(r"#{1,6}\s+(.*)", line):
            section = heading.group(1).strip()
        i += 1
    return commands


def _bash_commands(body: list[str], first_line: int, section: str, block: int) -> list[Command]:
    commands = []
    j = 0
    while j < len(body):
        number = first_line + j + 1
        logical = body[j]
        while logical.rstrip().endswith("\\") and j + 1 < len(body):
            j += 1
            logical = logical.rstrip()[:-1].rstrip() + " " + body[j].strip()
        j += 1
        logical = strip_comment(logical)
        if not logical.strip():
            continue
        heredoc_lines: list[str] = []
        if match := HEREDOC.search(logical):
            delimiter = match.group(2)
            while j < len(body) and body[j].strip() != delimiter:
                heredoc_lines.append(body[j])
                j += 1
            j += 1  # the delimiter
        chain = " ".join(logical.split())
        for part in split_and(logical):
            text = " ".join(part.split())
            own = HEREDOC.search(part)  # the heredoc's lines belong to the part that opens it
            script = "\n".join([part, *heredoc_lines, own.group(2)]) if own else part
            commands.append(Command(text, script, section, block, "bash", number, chain))
    return commands


COMMANDS = parse_readme(README.read_text(encoding="utf-8"))


# -- the table: README command -> the test that runs it -----------------------------------

@dataclass(frozen=True)
class Entry:
    """Which test runs the README commands that ``pattern`` matches.

    ``pattern`` must match the whole command text (see :class:`Command`) and
    ``section`` the heading of its README section. ``test`` is
    ``file.py::function``. ``role`` tells the deployment test what to do with
    a command of the deployment block.
    """

    section: str
    pattern: str
    test: str
    checks: str
    role: str = ""

    def matches(self, command: Command) -> bool:
        return (re.search(self.section, command.section) is not None
                and re.fullmatch(self.pattern, command.text, flags=re.DOTALL) is not None)


SIMULATE_TEST = f"{THIS}::test_simulate_command"
DEPLOY_TEST = f"{THIS}::test_deployment_section"

TABLE: tuple[Entry, ...] = (
    # -- the first block (installation and the default run)
    Entry(r"^fedcluster$", r"pip install \.", f"{THIS}::test_install_commands_name_this_project",
          "not run (the tests run in the environment it makes; .ci/run installs the project the "
          "same way); checks that `.` is this project and installs the `fedcluster` command"),
    Entry(r"^fedcluster$", r"fedcluster simulate", SIMULATE_TEST,
          "the default run: exit 0, every round answered by all clients, centroids moved, and the "
          "README's figures for it (CLAIMS: rounds, distance to S1's true centres)"),
    Entry(r"^fedcluster$", r'pip install "\.\[test\]"', f"{THIS}::test_install_commands_name_this_project",
          "not run; the `test` extra exists and holds what the README's other extras hold"),
    Entry(r"^fedcluster$", r"python -m pytest -q -ra", f"{THIS}::test_ci_runs_the_readme_test_command",
          "this suite; .ci/run runs exactly this README line"),
    # -- Simulation
    Entry(r"^Simulation$", r"fedcluster simulate .+", SIMULATE_TEST,
          "exit 0; per round clients_answered == clients_sampled == the participation the "
          "options ask for, none rejected, Flower node ids; first-round movement > 0 (one-shot: "
          "one round, logged as one-shot); one log line per round; model.pb and history.csv"),
    Entry(r"^Simulation$", r"fedcluster inspect results/model\.pb", SIMULATE_TEST,
          "run after each simulate command of its block: prints the model written (algorithm, "
          "rounds); its `--json` form (the comment) gives model.pb's centroids"),
    # -- Privacy
    Entry(r"^Privacy", r'pip install "\.\[dp\]"', f"{THIS}::test_install_commands_name_this_project",
          "not run; the `dp` extra exists and the `test` extra (CI) holds all of it"),
    Entry(r"^Privacy", r"fedcluster simulate .+", SIMULATE_TEST,
          "a Ray simulation with secure aggregation, central DP or distributed DP: exit 0, every "
          "round answered by all clients it asked, centroids moved, model.pb and history.csv"),
    # -- DeepFeCA
    Entry(r"^DeepFeCA", r"fedcluster simulate .+", SIMULATE_TEST,
          "a Ray simulation of DeepFeCA on digits: exit 0, every round answered by all clients "
          "it asked, weights moved, one log line per round, model.pb and history.csv"),
    # -- Benchmarks
    Entry(r"^Benchmarks", r'pip install "\.\[bench\]"', f"{THIS}::test_install_commands_name_this_project",
          "not run; the `bench` extra exists and the `test` extra (CI) holds all of it"),
    Entry(r"^Benchmarks", r"fedcluster bench benchmarks/[\w.-]+\.toml", f"{THIS}::test_bench_command",
          "the committed runs.jsonl less a few runs (fixed seed): exactly those re-run, their "
          "metrics equal the committed ones (rel 1e-9), report and plots written"),
    # -- Deployment (one test runs the whole block in order)
    # Wherever the README asks to export Flower's offline switches, the deployment test
    # exports them (in README order) before the deployment block's commands.
    Entry(r".", r"export FLWR_TELEMETRY_ENABLED=0 .*", DEPLOY_TEST,
          "exported to every later command of the deployment test", role="export"),
    Entry(r"^Deployment", r"fedcluster partition .*", DEPLOY_TEST,
          "exit 0; one file per client, each SuperNode reads its own", role="step"),
    Entry(r"^Deployment", r"deploy/make-certs\.sh", DEPLOY_TEST,
          "exit 0; the CA and the SuperLink's certificate that the later commands use", role="step"),
    Entry(r"^Deployment", r"for n in .* do deploy/make-node-key\.sh .*; done", DEPLOY_TEST,
          "exit 0; one key pair per SuperNode", role="step"),
    Entry(r"^Deployment", r"for n in .* do flwr supernode register .*; done", DEPLOY_TEST,
          "exit 0 once the SuperLink listens; each SuperNode's key registered over TLS",
          role="step"),
    Entry(r"^Deployment", r"flower-superlink .*", DEPLOY_TEST,
          "starts; Fleet and Control ports listen (Fleet bound to 127.0.0.1 in the test)",
          role="superlink"),
    Entry(r"^Deployment", r"flower-supernode .*", DEPLOY_TEST,
          "each connects (its SuperNode ID is logged) and answers every request; a block that "
          "shows fewer SuperNodes than the partition command's --clients gets the rest, made "
          "from its last one (next file, next port)",
          role="supernode"),
    Entry(r"^Deployment", r"flwr config list", DEPLOY_TEST,
          "makes the Flower home with Flower's default connections (HOME and FLWR_HOME are "
          "temporary directories); after the recipe Flower still lists its default connection "
          "(the simulation section's `flwr run . --stream`) beside local-deployment", role="step"),
    Entry(r"^Deployment", r"""cat >> "?\S*/config\.toml"? <<'?EOF'?""", DEPLOY_TEST,
          "appends the connection to the Flower home's config.toml (FLWR_HOME = $HOME/.flwr, "
          "both temporary)", role="step"),
    Entry(r"^Deployment", r"(flwr run \. local-deployment --stream|fedcluster submit) .*", DEPLOY_TEST,
          "exit 0; the model.pb it wrote has every train round answered by all SuperNodes, whose "
          "logged ids are the participants; the streamed log shows the rounds", role="submit"),
    # -- Docker Compose: run by tests/test_docker.py (real containers)
    Entry(r"^Docker Compose$", r"docker compose build", "test_docker.py::test_compose_demo_equals_simulation",
          "the image is built without a registry (tests/harness/docker_build.py) and `compose up` uses it"),
    Entry(r"^Docker Compose$", r"deploy/build-offline-image\.sh",
          "test_docker.py::test_offline_build_script_tags_the_image",
          "builds (or finds, by content hash) the image without a registry and tags it fedcluster:latest"),
    Entry(r"^Docker Compose$", r"export FEDCLUSTER_UID=\$\(id -u\) FEDCLUSTER_GID=\$\(id -g\)",
          "test_docker.py::test_compose_demo_equals_simulation",
          "every compose project of the tests runs with the test user's UID and GID"),
    Entry(r"^Docker Compose$", r"docker compose up", "test_docker.py::test_compose_demo_equals_simulation",
          "the demo runs to the end; ./results holds the model a simulation of the same data gives"),
    Entry(r"^Docker Compose$", r"fedcluster inspect results/model\.pb",
          "test_docker.py::test_compose_demo_equals_simulation",
          "`fedcluster inspect results/model.pb` prints the model the compose run wrote"),
    Entry(r"^Docker Compose$", r"docker compose down", "test_docker.py::test_compose_demo_equals_simulation",
          "the project is taken down and a second `up` runs again"),
    Entry(r"^Docker Compose$", r"(\w+=\S+ )+docker compose -f deploy/supernode\.yml up -d",
          "test_docker.py::test_tls_and_supernode_auth",
          "an edge SuperNode from deploy/supernode.yml with these variables joins over TLS"),
    # -- Standardisation and choosing k
    Entry(r"^Standardisation and choosing k$", r"fedcluster simulate .+", SIMULATE_TEST,
          "as the Simulation section's commands; --standardize: the model holds the transform; "
          "--k-range: the curve and the chosen k are printed, k-selection.csv has a row per k"),
    Entry(r"^Standardisation and choosing k$", r"from fedcluster import select_k.*",
          f"{THIS}::test_select_k_block",
          "the block runs without Flower and prints the curve, the chosen k and the centres' shape"),
    # -- Python
    Entry(r"^Python$", r"from fedcluster import FederatedKMeans.*", f"{THIS}::test_python_block",
          "the block runs without Flower (no flwr module loaded) and prints the centres' shape; "
          "its model equals the Flower simulation's bit for bit (test_estimator.py)"),
)


@dataclass(frozen=True)
class Claim:
    """A figure the README states about one of its commands, checked where that command runs."""

    name: str
    pattern: str  # a regex over README.md (whitespace-insensitive); its groups are the figures:
    #               the rounds (optional) and the distance to the true centres (last)
    command: str  # the README command (its text) the claim is about


CLAIMS: tuple[Claim, ...] = (
    Claim("default run",
          r"The default run \(`fedcluster simulate`.*?converges in (\d+) rounds to centres "
          r"([0-9.]+e[0-9]+) from S1's true centres",
          "fedcluster simulate"),
    Claim("EWF example", r"EWF on the DWF paper's blobs, .*? ends ([0-9.]+) from the five true",
          "fedcluster simulate --algorithm ewf --dataset blobs --k 5 --clients 100 "
          "--participation 0.1 --local-steps 5 --lr 0.5 --momentum 0.5 --split dirichlet:0.3"),
    Claim("FeCA example", r"this command \(seed 0\) ends ([0-9.]+e[0-9]+) from S1's true centres",
          "fedcluster simulate --algorithm feca --dataset s1 --clients 10 --split dirichlet:0.3"),
    Claim("fedkmeans example", r"random start, ends ([0-9.]+) from the centres 1, 2",
          "fedcluster simulate --algorithm fedkmeans --dataset triebe --k 5 --participation 0.1 "
          "--local-steps 5 --client-lr 0.2 --lr 1 --momentum 0.5 --init random"),
)


def entries_of(command: Command) -> list[Entry]:
    return [entry for entry in TABLE if entry.matches(command)]


def entry_of(command: Command) -> Entry:
    (entry,) = entries_of(command)
    return entry


def commands_for(test: str) -> list[Command]:
    return [c for c in COMMANDS if any(e.test == test for e in entries_of(c))]


def claim_values(claim: Claim) -> tuple[str, ...] | None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    match = re.search(claim.pattern, text)
    return match.groups() if match else None


# -- fast checks -----------------------------------------------------------------------------

def _test_exists(test: str) -> bool:
    file, _, name = test.partition("::")
    path = TESTS / file
    if not path.is_file():
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.FunctionDef) and node.name == name for node in tree.body)


def test_readme_parses_into_commands():
    assert len(COMMANDS) >= 20, [str(c) for c in COMMANDS]
    texts = [c.text for c in COMMANDS]
    # Continuations are joined, comments dropped, && chains split, heredocs kept.
    assert "fedcluster simulate" in texts and "pip install ." in texts
    assert not any("#" in c.text for c in COMMANDS if c.lang == "bash"), texts
    assert not any(t.endswith("\\") for t in texts)
    heredocs = [c for c in COMMANDS if HEREDOC.search(c.text)]
    assert heredocs and all(c.script.count("\n") >= 2 for c in heredocs)


def test_every_readme_command_has_a_test():
    """Each README command matches exactly one TABLE entry; each entry matches a command."""
    problems = []
    for command in COMMANDS:
        found = entries_of(command)
        if len(found) != 1:
            problems.append(f"{command}: {len(found)} table entries match "
                            f"({[e.pattern for e in found]}); add one to TABLE in tests/{THIS}")
    for entry in TABLE:
        if not any(entry.matches(c) for c in COMMANDS):
            problems.append(f"table entry {entry.pattern!r} (section {entry.section!r}) matches no "
                            "README command: the README lost it, or the entry is stale")
        if not _test_exists(entry.test):
            problems.append(f"table entry {entry.pattern!r} names {entry.test}, which does not exist")
    assert not problems, "\n".join(problems)


def test_readme_claims_are_where_the_tests_look():
    """The figures CLAIMS checks are still in the README, about a command the README has."""
    for claim in CLAIMS:
        assert claim_values(claim) is not None, \
            f"README.md no longer states the {claim.name} figures as {claim.pattern!r}: update CLAIMS"
        assert any(c.text == claim.command for c in COMMANDS), claim


def test_the_deployment_recipe_is_secure_by_default():
    """TLS and registered SuperNodes only; ``--insecure`` only where the README says one machine."""
    deployment = [c for c in COMMANDS if c.section.startswith("Deployment")]
    superlink = [c.text for c in deployment if c.text.startswith("flower-superlink")]
    supernodes = [c.text for c in deployment if c.text.startswith("flower-supernode")]
    assert superlink and supernodes
    assert all("--insecure" not in c.text and "insecure = true" not in c.script for c in deployment)
    for flag in ("--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certfile", "--enable-supernode-auth"):
        assert all(flag in text for text in superlink), flag
    assert all("--root-certificates" in t and "--auth-supernode-private-key" in t for t in supernodes)
    text = README.read_text(encoding="utf-8")
    for match in re.finditer(r"--insecure", text):
        section = text.rfind("\n#", 0, match.start())
        heading = text[section:text.index("\n", section + 1)]
        assert "single trusted machine" in heading, heading


def test_install_commands_name_this_project():
    """`pip install .` installs this project's `fedcluster`; each extra named exists; CI's
    `test` extra holds every requirement of the other extras the README installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"]["fedcluster"] == "fedcluster.cli:main"
    extras = project["optional-dependencies"]
    for command in COMMANDS:
        if command.text.startswith("pip install"):
            target = shlex.split(command.text)[2]
            match = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", target)
            assert match, command
            for extra in (match.group(1) or "").split(","):
                if extra:
                    assert extra in extras, f"{command}: pyproject.toml has no extra {extra!r}"
                    if extra not in ("test", "gpu"):
                        lacking = set(extras[extra]) - set(extras["test"])
                        assert not lacking, f"the test extra lacks {lacking} of {extra!r}"


def test_ci_runs_the_readme_test_command():
    """.ci/run runs the README's test line (pip's ``-q`` aside, which keeps CI's log short)."""
    (line,) = {c.chain for c in COMMANDS if c.text == "python -m pytest -q -ra"}
    ci = {" ".join(raw.split()).replace("pip install -q ", "pip install ")
          for raw in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()}
    assert line in ci, f".ci/run does not run the README's `{line}`"


# -- running commands ----------------------------------------------------------------------------

def user_env(home: Path) -> dict[str, str]:
    """A user's environment: this venv's commands first, Flower offline, a fresh home."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("FLWR_", "PYTEST_", "RAY_"))}
    env.update(FLOWER_OFFLINE_ENV)
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["FLWR_HOME"] = str(home / ".flwr")
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_shell(command: Command | str, cwd: Path, env: dict, timeout: float
              ) -> subprocess.CompletedProcess:
    script = command.script if isinstance(command, Command) else command
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def read_history(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in ("round", "clients_sampled", "clients_answered", "clients_rejected"):
            row[key] = int(row[key])
        row["movement"] = float(row["movement"])
        row["participants"] = [int(p) for p in row["participants"].split(";") if p]
    return rows


def one_shot_methods() -> set[str]:
    """The methods README's method table marks one-shot."""
    names = set()
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 4 and cells[-1] == "one-shot":
            names.update(re.findall(r"`([\w-]+)`", cells[0]))
    return names


def simulate_args(command: Command):
    """The options a simulate command parses into (fedcluster's own parser).

    A run-config option left out takes its default (the parser leaves it
    ``None``), so that ``fedcluster simulate`` and the same options spelled out
    parse alike.
    """
    from fedcluster.cli import _parser
    from fedcluster.config import RunConfig

    args = _parser().parse_args(shlex.split(command.text)[1:])
    for key, value in vars(args).items():
        field = RunConfig.model_fields.get(key.replace("-", "_"))
        if value is None and field is not None:
            setattr(args, key, field.default)
    return args


def _simulate_groups() -> list[list[Command]]:
    """The README's simulate commands, those that parse to the same options together."""
    groups: dict[str, list[Command]] = {}
    for command in commands_for(SIMULATE_TEST):
        if command.text.startswith("fedcluster simulate"):
            key = repr(sorted((k, repr(v)) for k, v in vars(simulate_args(command)).items()
                              if k != "func"))
            groups.setdefault(key, []).append(command)
    return list(groups.values())


SIMULATE_GROUPS = _simulate_groups()


def _short(text: str, size: int = 60) -> str:
    text = text.replace("fedcluster simulate", "simulate").replace(" --", " ")
    return text if len(text) <= size else text[:size] + "..."


@pytest.mark.slow
@pytest.mark.parametrize("group", SIMULATE_GROUPS, ids=[_short(g[0].text) for g in SIMULATE_GROUPS])
def test_simulate_command(group, tmp_path):
    """A README simulate command trains: every round answered by all it asked, centroids moved."""
    command = group[0]
    args = simulate_args(command)
    work = tmp_path / "work"
    work.mkdir()
    env = user_env(tmp_path / "home")
    started = time.monotonic()
    done = run_shell(command, work, env, timeout=600)
    wall = time.monotonic() - started
    print(f"{command.text}: exit {done.returncode} in {wall:.1f} s")
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-4000:]}"

    from fedcluster.server.artifacts import read_model

    model = read_model(work / "results" / "model.pb")
    history = read_history(work / "results" / "history.csv")
    train = [row for row in history if row["phase"] == "train"]
    assert train and model.rounds == len(train), history
    algorithm = args.algorithm
    assert model.algorithm == algorithm
    n_clients = args.clients
    if getattr(args, "clients-per-round"):
        per_round = min(getattr(args, "clients-per-round"), n_clients)
    else:
        per_round = max(1, math.ceil(args.participation * n_clients - 1e-9))
    for row in history:
        asked = n_clients if row["phase"] == "init" or algorithm in one_shot_methods() else per_round
        assert row["clients_sampled"] == asked, (command.text, row)
        assert row["clients_answered"] == row["clients_sampled"] and row["clients_rejected"] == 0, row
        assert len(row["participants"]) == row["clients_answered"], row
        assert min(row["participants"]) >= SMALLEST_FLOWER_ID, row
    if algorithm in one_shot_methods():
        assert model.rounds == 1 and model.converged, model.rounds
        assert f"{algorithm} is one-shot" in done.stderr or "is one-shot: finished in one round" in done.stderr
    else:
        first = train[0]["movement"]
        assert math.isfinite(first) and first > 0, train[0]
    # One log line per round (movement, score, clients), and the summary.
    # DeepFeCA's rounds log the weights' movement instead of the centroids' and a score.
    per_round_lines = re.findall(r"round \d+/\d+: (?:movement .*, score|\d+ pseudo-classes, "
                                 r"weights moved) .*, clients \d+/\d+", done.stderr)
    if args.k_range:  # one run per k: the curve and the choice, and the chosen run's model
        from fedcluster.selection import parse_k_range

        ks = parse_k_range(args.k_range)
        chosen = re.search(r"chosen k = (\d+) \(", done.stdout)
        assert chosen and int(chosen.group(1)) == model.n_clusters in ks, done.stdout
        curve = (work / "results" / "k-selection.csv").read_text().splitlines()
        assert [int(line.split(",")[0]) for line in curve[1:]] == ks
        per_round_lines = None  # every k's rounds are logged, not only the chosen one's
    if args.standardize:
        assert model.shift is not None and "standardised: centroids" in done.stdout
    assert per_round_lines is None or len(per_round_lines) == (0 if algorithm in one_shot_methods() else model.rounds), \
        done.stderr[-3000:]
    assert "fedcluster model" in done.stdout and "model: results/model.pb" in done.stdout

    distance = re.search(r"distance to the true centres of \S+: (\S+) ", done.stdout)
    for claim in CLAIMS:
        if claim.command in {c.text for c in group}:
            values = claim_values(claim)
            assert values is not None, claim
            *rounds, figure = values
            assert not rounds or model.rounds == int(rounds[0]), \
                f"README: {claim.name} converges in {rounds[0]} rounds; measured {model.rounds}"
            assert distance is not None, done.stdout
            measured = float(distance.group(1))
            half_unit = 0.5 * 10 ** (math.floor(math.log10(abs(float(figure)))) - (
                len(figure.split("e")[0].replace(".", "").lstrip("0")) - 1))
            print(f"claim {claim.name}: README {figure}, measured {measured:.6g} "
                  f"(tolerance +-{half_unit:g}); {model.rounds} rounds; {wall:.1f} s")
            assert abs(measured - float(figure)) <= half_unit, \
                f"README: {claim.name} ends {figure} from the true centres; measured {measured:.6g}"

    # The README's inspect commands of the same block, in the same working directory.
    for inspect in [c for c in commands_for(SIMULATE_TEST)
                    if c.block == command.block and c.text.startswith("fedcluster inspect")]:
        for variant in (inspect.text, inspect.text + " --json"):  # "# or --json, with the centroids"
            shown = run_shell(variant, work, env, timeout=120)
            assert shown.returncode == 0, shown.stderr
            if variant.endswith("--json"):
                data = json.loads(shown.stdout)
                assert data["algorithm"] == algorithm and data["rounds"] == model.rounds
                np.testing.assert_array_equal(np.asarray(data["centroids"]), model.centroids)
            else:
                assert f"algorithm      {algorithm}" in shown.stdout
                assert re.search(rf"rounds\s+{model.rounds}\n", shown.stdout), shown.stdout


# -- fedcluster bench ---------------------------------------------------------------------------

#: Runs deleted from each committed grid and run again.
BENCH_RERUNS = 3
#: Only runs whose committed wall time is below this are chosen (keeps CI short).
BENCH_MAX_WALL_S = 8.0
BENCH_SEED = 20261124
#: Relative tolerance of a re-run metric against the committed one.
BENCH_RTOL = 1e-9
BENCH_IGNORED = ("wall_s", "traceback")


def choose_reruns(rows: list[dict], grid_name: str) -> list[str]:
    """Run ids to run again: fixed seed, distinct methods where the grid has several."""
    eligible = sorted({r["run_id"]: r for r in rows if not r.get("error")
                       and r["wall_s"] <= BENCH_MAX_WALL_S}.values(), key=lambda r: r["run_id"])
    rng = random.Random(f"{BENCH_SEED}:{grid_name}")
    rng.shuffle(eligible)
    chosen, methods = [], set()
    for row in eligible:
        if row["method"] not in methods:
            chosen.append(row["run_id"])
            methods.add(row["method"])
        if len(chosen) == BENCH_RERUNS:
            break
    for row in eligible:  # a grid with fewer methods: fill up
        if len(chosen) == BENCH_RERUNS:
            break
        if row["run_id"] not in chosen:
            chosen.append(row["run_id"])
    return chosen


def compare_rows(committed: dict, rerun: dict) -> list[str]:
    """The metrics of ``rerun`` that differ from ``committed`` beyond BENCH_RTOL."""
    problems = []
    for key, old in committed.items():
        if key in BENCH_IGNORED:
            continue
        new = rerun.get(key)
        if isinstance(old, float) or isinstance(new, float):
            if old is None or new is None:
                ok = old is new
            elif math.isnan(old) and math.isnan(new):
                ok = True
            else:
                ok = math.isclose(old, new, rel_tol=BENCH_RTOL, abs_tol=1e-12)
            if not ok:
                rel = abs(new - old) / max(abs(old), 1e-300) if None not in (old, new) else math.inf
                problems.append(f"{key}: committed {old!r}, now {new!r} (rel. diff {rel:.3g})")
        elif isinstance(old, list):
            a, b = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
            finite = np.abs(a[np.isfinite(a)])
            scale = float(finite.max()) if finite.size and a.shape == b.shape else 0.0
            if a.shape != b.shape or not np.allclose(a, b, rtol=BENCH_RTOL, atol=BENCH_RTOL * scale,
                                                     equal_nan=True):
                gaps = np.abs(a - b)[np.isfinite(a) & np.isfinite(b)] if a.shape == b.shape else None
                worst = (float(gaps.max(initial=0.0)) / max(scale, 1e-300)
                         if gaps is not None else math.inf)
                nan_moved = a.shape == b.shape and bool((np.isnan(a) != np.isnan(b)).any())
                problems.append(f"{key}: {a.shape} vs {b.shape}, largest diff {worst:.3g} of the "
                                "largest entry" + ("; NaN where a number was, or back" if nan_moved
                                                   else ""))
        elif old != new:
            problems.append(f"{key}: committed {old!r}, now {new!r}")
    return problems


BENCH_COMMANDS = commands_for(f"{THIS}::test_bench_command")


@pytest.mark.slow
@pytest.mark.parametrize("command", BENCH_COMMANDS, ids=[c.text.split("/")[-1] for c in BENCH_COMMANDS])
def test_bench_command(command, tmp_path):
    """The README's bench command resumes the committed grid and reproduces the runs it re-runs."""
    from fedcluster.bench import load_grid

    relative = Path(shlex.split(command.text)[2])
    grid = load_grid(REPO / relative)
    committed_dir = REPO / "benchmarks" / "results" / grid.name
    committed_lines = (committed_dir / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    committed = [json.loads(line) for line in committed_lines if line.strip()]
    by_id = {row["run_id"]: row for row in committed if not row.get("error")}
    assert {run.run_id for run in grid.runs} <= set(by_id), \
        f"{committed_dir}/runs.jsonl lacks runs of {relative}: the committed results are stale"
    chosen = choose_reruns(committed, grid.name)
    assert len(chosen) >= 2, f"{grid.name}: fewer than 2 runs under {BENCH_MAX_WALL_S} s"

    # The user's checkout, in a temporary directory: the grid file and the committed results.
    work = tmp_path / "work"
    (work / relative).parent.mkdir(parents=True)
    shutil.copy2(REPO / relative, work / relative)
    out = work / "benchmarks" / "results" / grid.name
    out.mkdir(parents=True)
    kept = [line for line, row in zip(committed_lines, committed) if row["run_id"] not in chosen]
    (out / "runs.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")

    started = time.monotonic()
    done = run_shell(command, work, user_env(tmp_path / "home"), timeout=600)
    wall = time.monotonic() - started
    print(f"{command.text}: re-ran {chosen} in {wall:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    total = len(grid.runs)
    if said := re.search(r"(\d+) runs?, (\d+) already done, (\d+) to run", done.stdout):
        assert said.groups() == (str(total), str(total - len(chosen)), str(len(chosen))), said[0]
    if said := re.search(r"(\d+) of (\d+) runs done", done.stdout):
        assert said.groups() == (str(total), str(total)), said[0]
    assert (out / "report.md").is_file() and (out / "runs.csv").is_file()

    lines = (out / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[:len(kept)] == kept  # resumed, not rewritten
    rerun = [json.loads(line) for line in lines[len(kept):] if line.strip()]
    assert sorted(r["run_id"] for r in rerun) == sorted(chosen)
    problems = []
    for row in rerun:
        assert not row.get("error"), row.get("traceback", row["error"])
        if found := compare_rows(by_id[row["run_id"]], row):
            old = by_id[row["run_id"]]
            problems.append(f"{grid.name} run {row['run_id']} ({old['method']} {old['setting']} "
                            f"{old['dataset']} {old['split']} seed {old['seed']}): " + "; ".join(found))
    assert not problems, "committed results not reproduced:\n" + "\n".join(problems)


# -- the deployment block ---------------------------------------------------------------------------

NODE_ID = re.compile(r"SuperNode ID: (\d+)")


def _port_in_use(port: int) -> bool:
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return True
    return False


def _wait_for_port(port: int, timeout: float, proc: subprocess.Popen, name: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited with {proc.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"{name}: nothing listens on 127.0.0.1:{port} after {timeout} s")


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _next_supernode(script: str, index: int, port: int) -> str:
    """The README's last SuperNode command for the data owner ``index`` (its file, its port)."""
    script = re.sub(r"client_\d{3}", f"client_{index:03d}", script)
    return re.sub(r"--port \d+", f"--port {port}", script)


DEPLOY_COMMANDS = commands_for(DEPLOY_TEST)


@pytest.mark.slow
def test_deployment_section(tmp_path):
    """The deployment block, as written, on loopback: a run that every SuperNode answers."""
    roles = [(entry_of(c).role, c) for c in DEPLOY_COMMANDS]
    assert [r for r, _ in roles].count("submit") == 1 and [r for r, _ in roles].count("superlink") == 1
    superlink_argv = shlex.split(next(c.text for r, c in roles if r == "superlink"))
    fleet_port = int((_option(superlink_argv, "--fleet-api-address") or ":9092").rsplit(":", 1)[1])
    control_port = int(_option(superlink_argv, "--port") or 8000)
    supernodes = [c.script for r, c in roles if r == "supernode"]
    partition = next(c for r, c in roles if c.text.startswith("fedcluster partition"))
    owners = int(_option(shlex.split(partition.text), "--clients"))
    node_ports = [int(_option(shlex.split(s.replace("\n", " ")), "--port")) for s in supernodes]
    # "# ... one per data owner, each with its own file": one SuperNode per partition file.
    while len(supernodes) < owners:
        node_ports.append(max(node_ports) + 1)
        supernodes.append(_next_supernode(supernodes[-1], len(supernodes), node_ports[-1]))
    taken = [p for p in (fleet_port, control_port, *node_ports) if _port_in_use(p)]
    if taken:
        pytest.skip(f"the README's deployment uses the default ports {fleet_port}, {control_port} "
                    f"and {node_ports}; port(s) {taken} are taken on this machine")

    # A copy of the checkout (the app bundle carries pyproject.toml and README.md only).
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, work / name)
    # The recipe makes its certificates and keys with the project's scripts.
    shutil.copytree(REPO / "deploy", work / "deploy", ignore=shutil.ignore_patterns(
        "certs", "keys", "demo-data", "wheels"))
    env = user_env(tmp_path / "home")
    services: list[tuple[str, subprocess.Popen]] = []

    def start(name: str, script: str) -> subprocess.Popen:
        # A service line may end in "&" (run in the background); the test starts it so anyway,
        # and keeps every listening socket on loopback.
        script = script.strip().removesuffix("&").strip().replace("0.0.0.0:", "127.0.0.1:")
        log = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed when the test ends
        proc = subprocess.Popen(["bash", "-c", f"exec {script}"], cwd=work, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        services.append((name, proc))
        return proc

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(tmp_path.glob("*.log")))

    submitted = None
    try:
        for role, command in roles:
            if role == "export":
                for assignment in shlex.split(command.text)[1:]:
                    key, _, value = assignment.partition("=")
                    env[key] = value
            elif role == "superlink":
                # The test binds the Fleet API to loopback (Flower's default is 0.0.0.0).
                script = command.script
                if "--fleet-api-address" not in script:
                    script += f" --fleet-api-address 127.0.0.1:{fleet_port}"
                proc = start("superlink", script)
                _wait_for_port(fleet_port, 60, proc, "the SuperLink's Fleet API")
                _wait_for_port(control_port, 60, proc, "the SuperLink's Control API")
            elif role == "supernode":
                if not any(name.startswith("supernode") for name, _ in services):
                    for i, script in enumerate(supernodes):  # the README's and the "..." ones
                        start(f"supernode-{i}", script)
            elif role == "step":
                done = run_shell(command, work, env, timeout=300)
                assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
                if command.text.startswith("fedcluster partition"):
                    files = sorted((work / _option(shlex.split(command.text), "--out")).glob("client_*"))
                    assert len(files) == owners, files
            elif role == "submit":
                started = time.monotonic()
                submitted = run_shell(command, work, env, timeout=500)
                print(f"{command.text}: exit {submitted.returncode} in "
                      f"{time.monotonic() - started:.1f} s")
            else:
                raise AssertionError(f"no role for {command}")
        ids = set()
        for i in range(len(supernodes)):
            if match := NODE_ID.search((tmp_path / f"supernode-{i}.log").read_text(errors="replace")):
                ids.add(int(match.group(1)))
    finally:
        for name, proc in reversed(services):  # SuperNodes first, then the SuperLink
            stop_group(proc)

    assert submitted is not None
    assert submitted.returncode == 0, submitted.stdout[-4000:] + submitted.stderr[-4000:] + logs()
    # The recipe added its connection to the user's Flower home without losing the default one.
    listed = subprocess.run([str(BIN / "flwr"), "config", "list"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=60)
    assert re.search(r"local \(default\)", listed.stdout) and "local-deployment" in listed.stdout, \
        listed.stdout + listed.stderr
    from fedcluster.server.artifacts import read_model

    models = list(work.rglob("model.pb"))
    assert len(models) == 1, (models, submitted.stdout[-3000:], logs())
    model = read_model(models[0])
    assert len(ids) == owners, logs()
    assert model.n_points == 5000 and len(model.centroids) == 15, model
    train = [r for r in model.history if r.phase == "train"]
    assert train and model.rounds == len(train)
    for record in model.history:
        assert record.clients_sampled == record.clients_answered == owners, record
        assert record.clients_rejected == 0 and set(record.participants) == ids, (record, ids)
    assert np.isfinite(train[0].movement) and train[0].movement > 0
    assert "round 1/" in submitted.stdout + submitted.stderr


# -- the Python block --------------------------------------------------------------------------

def run_python_block(section: str, tmp_path: Path) -> str:
    """Run the README's python block of ``section`` as written, asserting that no Flower module
    loads (it runs in memory); return its output."""
    (block,) = [c for c in COMMANDS if c.lang == "python" and c.section == section]
    script = block.script + ("\nimport sys\nassert not [m for m in sys.modules "
                             "if m.split('.')[0] == 'flwr'], 'flwr loaded'\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                          env=user_env(tmp_path / "home"), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_python_block(tmp_path):
    """The README's Python block runs as written, in memory: no Flower module is loaded."""
    assert run_python_block("Python", tmp_path).startswith("(15, 2) ")


def test_select_k_block(tmp_path):
    """The README's k-selection block runs as written, in memory: no Flower module is loaded."""
    out = run_python_block("Standardisation and choosing k", tmp_path)
    assert "<- chosen (silhouette)" in out and out.rstrip().endswith("(15, 2)")
