"""Build the fedcluster image without a container registry, cached by content hash.

No image can be pulled on the machines that run these tests, so the base image
is made here: a Debian root file system from ``debootstrap`` (Debian's package
repository) with python3 and python3-venv, loaded with ``docker import``. The
project's pinned dependencies are downloaded as wheels from PyPI on the host
into a wheelhouse, which the build copies (``deploy/wheels/``), so the image
build itself runs with ``--network none``. The Dockerfile is the one users
build; only its ``BASE_IMAGE`` argument differs.

Caches (reused on purpose, each named by the hash of what it is made from):

- ``fedcluster-base:<hash>``: the Debian base; hash of the suite, mirror,
  packages and recipe below.
- ``$FEDCLUSTER_DOCKER_CACHE/wheels-<hash>`` (default
  ``~/.cache/fedcluster-docker``): the wheelhouse; hash of
  ``deploy/requirements.txt`` and ``deploy/build-requirements.txt``.
- ``fedcluster-deps:<hash>``: the Dockerfile's ``deps`` stage (the runtime with
  the pinned dependencies, the slow part of a build); hash of the base image
  id, the wheelhouse, the Dockerfile and ``deploy/requirements.txt``. Tagged so
  that its layers stay as the build cache when older images are removed.
- ``fedcluster-test:<hash>``: the image; hash of the base image id, the
  wheelhouse hash and every file of the build context.

A new hash replaces the older tags of the same name (and their wheelhouses),
so at most one of each stays on the machine. ``FEDCLUSTER_TEST_BASE_IMAGE``
names an existing base instead (for example ``python:3.11-slim`` where a
registry is reachable). Run ``python tests/harness/docker_build.py`` to build (or
find) the image and print its tag.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SUITE = "bookworm"  # Debian 12: python3 is 3.11, as deploy/requirements.txt was resolved for
MIRROR = os.environ.get("FEDCLUSTER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_RECIPE = 1  # bump when the way the base is made changes
BASE_REPO = "fedcluster-base"
DEPS_REPO = "fedcluster-deps"
IMAGE_REPO = "fedcluster-test"
CACHE = Path(os.environ.get("FEDCLUSTER_DOCKER_CACHE", Path.home() / ".cache" / "fedcluster-docker"))
REQUIREMENTS = ("deploy/requirements.txt", "deploy/build-requirements.txt")
#: What the Dockerfile's context holds (see .dockerignore), besides the wheels.
CONTEXT = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "fedcluster",
           "deploy/requirements.txt", "deploy/build-requirements.txt", "deploy/docker")


class DockerUnavailable(RuntimeError):
    """This machine cannot build or run the image; the message says why."""


def tool_env() -> dict[str, str]:
    """This process's environment without what would leak into other Python programs.

    Ray's simulation sets PYTHONPATH to this virtual environment in os.environ,
    and Compose v1 (docker-compose) is a Python program of the system's.
    """
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONBREAKPOINT")}


def log(message: str) -> None:
    print(f"[docker_build] {message}", file=sys.stderr, flush=True)


def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=True, text=True, **kwargs)


def docker_problem() -> str | None:
    """Why Docker cannot be used here, or None when it can."""
    if shutil.which("docker") is None:
        return "no docker command on this machine"
    try:
        done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "the Docker engine does not answer (docker info timed out)"
    if done.returncode != 0:
        return f"the Docker engine is not reachable: {done.stderr.strip()[:300]}"
    return None


def compose_command() -> list[str] | None:
    """``docker compose`` (v2) where it works, else ``docker-compose`` (v1), else None."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(command[0]) is None:
            continue
        done = subprocess.run([*command, "version"], capture_output=True, text=True,
                              env=tool_env())
        if done.returncode == 0:
            return command
    return None


def image_id(ref: str) -> str | None:
    done = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def _drop_other_tags(repository: str, keep: str) -> None:
    """Remove the images of ``repository`` other than tag ``keep`` (stale cache entries)."""
    done = run(["docker", "image", "ls", repository, "--format", "{{.Repository}}:{{.Tag}}"],
               capture_output=True)
    for ref in done.stdout.split():
        if ref != f"{repository}:{keep}":
            subprocess.run(["docker", "image", "rm", ref], capture_output=True)


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:16]


def base_image() -> str:
    """The Debian base image's reference, made with debootstrap if not cached."""
    if given := os.environ.get("FEDCLUSTER_TEST_BASE_IMAGE"):
        if image_id(given) is None:
            raise DockerUnavailable(f"FEDCLUSTER_TEST_BASE_IMAGE={given} is not on this machine")
        return given
    tag = _digest(SUITE.encode(), MIRROR.encode(), " ".join(PACKAGES).encode(),
                  str(BASE_RECIPE).encode())
    ref = f"{BASE_REPO}:{tag}"
    if image_id(ref):
        return ref
    debootstrap = shutil.which("debootstrap") or shutil.which("debootstrap", path="/usr/sbin:/sbin")
    if debootstrap is None:
        raise DockerUnavailable("no base image: debootstrap is not installed "
                                "(apt-get install debootstrap), and no registry can be used")
    if os.geteuid() != 0:
        raise DockerUnavailable("no base image: debootstrap needs root")
    started = time.monotonic()
    log(f"making {ref} with debootstrap {SUITE} ({', '.join(PACKAGES)}) from {MIRROR}")
    with tempfile.TemporaryDirectory(prefix="fedcluster-rootfs-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        done = subprocess.run(
            [debootstrap, "--variant=minbase", f"--include={','.join(PACKAGES)}",
             SUITE, str(root), MIRROR], capture_output=True, text=True,
            env={**tool_env(), "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"})
        if done.returncode != 0:
            raise DockerUnavailable(f"debootstrap failed: {(done.stdout + done.stderr)[-2000:]}")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for path in (root / junk).glob("*"):
                if path.is_file():
                    path.unlink()
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-c", "."],
                               stdout=subprocess.PIPE)
        run(["docker", "import", "--change", "ENV LANG=C.UTF-8",
             "--change", 'CMD ["/bin/sh"]', "-", ref], stdin=tar.stdout, capture_output=True)
        if tar.wait() != 0:
            raise DockerUnavailable("tar of the debootstrap root file system failed")
    _drop_other_tags(BASE_REPO, tag)
    log(f"{ref} made in {time.monotonic() - started:.0f} s")
    return ref


def wheelhouse() -> Path:
    """A folder with a wheel for every line of the requirement files (cached)."""
    texts = [(REPO / name).read_bytes() for name in REQUIREMENTS]
    tag = _digest(*texts)
    target = CACHE / f"wheels-{tag}"
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log(f"downloading the pinned wheels into {target}")
    tmp = Path(tempfile.mkdtemp(prefix="wheels-", dir=CACHE))
    try:
        args = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                "--only-binary=:all:", "--no-deps", "--dest", str(tmp)]
        for name in REQUIREMENTS:
            args += ["-r", str(REPO / name)]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            raise DockerUnavailable(f"pip download of the pinned wheels failed: {done.stderr[-2000:]}")
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in CACHE.glob("wheels-*"):
        if old != target and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    log(f"wheelhouse ready in {time.monotonic() - started:.0f} s")
    return target


def _context_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for name in CONTEXT:
        path = root / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file()
                            and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))
    return files


def _copy_context(root: Path, dest: Path) -> None:
    for path in _context_files(root):
        target = dest / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def build_image(root: Path = REPO) -> str:
    """The fedcluster image of the tree at ``root``, built offline if not cached."""
    base = base_image()
    wheels = wheelhouse()
    h = hashlib.sha256()
    h.update((image_id(base) or base).encode())
    h.update(wheels.name.encode())
    for path in _context_files(root):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(oct(path.stat().st_mode & 0o111).encode())
        h.update(path.read_bytes())
    tag = h.hexdigest()[:16]
    ref = f"{IMAGE_REPO}:{tag}"
    if image_id(ref):
        return ref
    deps_tag = _digest((image_id(base) or base).encode(), wheels.name.encode(),
                       (root / "Dockerfile").read_bytes(),
                       (root / "deploy" / "requirements.txt").read_bytes())
    started = time.monotonic()
    log(f"building {ref} from {root} on {base} (no network)")
    with tempfile.TemporaryDirectory(prefix="fedcluster-context-") as tmp:
        context = Path(tmp)
        _copy_context(root, context)
        house = context / "deploy" / "wheels"
        house.mkdir(parents=True, exist_ok=True)
        for wheel in wheels.glob("*.whl"):
            shutil.copy2(wheel, house / wheel.name)
        build = ["docker", "build", "--force-rm", "--network", "none",
                 "--build-arg", f"BASE_IMAGE={base}"]
        steps = [["--target", "deps", "-t", f"{DEPS_REPO}:{deps_tag}"]] \
            if image_id(f"{DEPS_REPO}:{deps_tag}") is None else []
        steps.append(["--label", "fedcluster.test=1", "-t", ref])
        try:
            for step in steps:
                done = subprocess.run([*build, *step, str(context)], capture_output=True, text=True)
                if done.returncode != 0:
                    raise RuntimeError(f"docker build failed:\n{(done.stdout + done.stderr)[-6000:]}")
        finally:
            # Untagged images of this Dockerfile (LABEL fedcluster.build) are no one's cache:
            # an older build's wheel stage, or what a failed build left.
            subprocess.run(["docker", "image", "prune", "--force", "--filter", "label=fedcluster.build=1"],
                           capture_output=True)
    _drop_other_tags(IMAGE_REPO, tag)
    _drop_other_tags(DEPS_REPO, deps_tag)
    log(f"{ref} built in {time.monotonic() - started:.0f} s")
    return ref


if __name__ == "__main__":
    if problem := docker_problem():
        sys.exit(problem)
    print(build_image())
