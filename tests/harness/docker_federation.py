"""A compose project of the fedcluster federation in a temporary copy of the repository.

Every project gets its own name (so its containers and networks are its own)
and is taken down, volumes and orphans included, when the ``with`` block ends.
Files the containers write belong to ``uid`` (the test's own user, or 4321
when the tests run as root, so that the containers never run as root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from .docker_build import (REPO, DockerUnavailable, build_image, compose_command, docker_problem,
                          tool_env)

#: What a user's checkout holds that the compose files use (the image is built apart).
PROJECT_FILES = ("docker-compose.yml", "deploy")
#: Made on a machine, never copied into a test project.
LOCAL_ONLY = ("demo-data", "certs", "keys", "*.whl", "__pycache__")


def container_uid() -> int:
    return os.getuid() or 4321


def require_image() -> str:
    """The image of this tree, or a skip saying why Docker cannot be used here."""
    if problem := docker_problem():
        pytest.skip(f"Docker tests need a Docker engine: {problem}")
    if compose_command() is None:
        pytest.skip("Docker tests need Docker Compose (docker compose or docker-compose)")
    try:
        return build_image()
    except DockerUnavailable as exc:
        pytest.skip(f"cannot build the fedcluster image here: {exc}")


def copy_project(dest: Path) -> Path:
    """Copy the compose files and deploy/ of the repository into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns(*LOCAL_ONLY))
        else:
            shutil.copy2(source, dest / name)
    return dest


class ComposeProject:
    """``docker compose -p NAME -f FILE...`` in ``directory``, with ``env`` added."""

    def __init__(self, directory: Path, image: str, files: tuple[str, ...] = ("docker-compose.yml",),
                 env: dict[str, str] | None = None, name: str | None = None) -> None:
        self.directory = directory
        self.files = files
        self.name = name or f"fctest{uuid.uuid4().hex[:10]}"
        uid = str(container_uid())
        self.env = {**tool_env(), "FEDCLUSTER_IMAGE": image, "FEDCLUSTER_UID": uid,
                    "FEDCLUSTER_GID": uid, **(env or {})}
        self.compose_cmd = compose_command()
        assert self.compose_cmd is not None

    def compose(self, *args: str, check: bool = True, timeout: float = 300
                ) -> subprocess.CompletedProcess:
        command = [*self.compose_cmd, "--project-name", self.name]
        for file in self.files:
            command += ["--file", file]
        done = subprocess.run([*command, *args], cwd=self.directory, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(command[-2:])} {' '.join(args)} failed "
                                 f"({done.returncode}):\n{done.stdout}\n{done.stderr}\n{self.logs()}")
        return done

    def up(self, *services: str) -> None:
        self.compose("up", "--detach", "--no-build", *services)

    def container(self, service: str) -> str:
        ids = self.compose("ps", "--all", "-q", service, check=False).stdout.split()
        if not ids:  # Compose v1 has no --all
            ids = self.compose("ps", "-q", service).stdout.split()
        assert ids, f"no container for {service}"
        return ids[0]

    def logs(self, *services: str) -> str:
        done = self.compose("logs", "--no-color", *services, check=False)
        return (done.stdout + done.stderr)[-20000:]

    def container_logs(self, service: str) -> str:
        done = subprocess.run(["docker", "logs", self.container(service)],
                              capture_output=True, text=True)
        return done.stdout + done.stderr

    def wait_for_log(self, service: str, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in (log := self.container_logs(service)):
                return log
            time.sleep(1)
        raise AssertionError(f"{service} did not log {text!r} within {timeout} s:\n{self.logs()}")

    def wait(self, service: str, timeout: float) -> int:
        """Wait for the container of ``service`` to exit; return its exit code."""
        container = self.container(service)
        try:
            done = subprocess.run(["docker", "wait", container], capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{service} still runs after {timeout} s:\n{self.logs()}") from None
        return int(done.stdout.strip())

    def down(self) -> None:
        self.compose("down", "--volumes", "--remove-orphans", "--timeout", "10", check=False,
                     timeout=180)

    def __enter__(self) -> ComposeProject:
        return self

    def __exit__(self, *exc) -> None:
        self.down()
