#!/usr/bin/env bash
# Build fedcluster:latest where no registry can be reached (`docker compose build`
# pulls python:3.11-slim from Docker Hub): a Debian 12 base made with debootstrap
# from Debian's package repository, the pinned wheels downloaded from PyPI on this
# machine, and the Dockerfile built with --network none (tests/harness/docker_build.py,
# the route the tests take; its images are cached by content hash). Needs root,
# debootstrap and a Docker engine. PYTHON names the interpreter (default: python,
# else python3); it needs pip.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-$(command -v python || command -v python3)}
ref=$("$python" tests/harness/docker_build.py)
docker tag "$ref" fedcluster:latest
echo "fedcluster:latest is $ref"
