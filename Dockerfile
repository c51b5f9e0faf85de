# fedcluster container image: one image for every role of a Flower deployment.
#
#   docker build -t fedcluster .
#   docker run --rm fedcluster flower-superlink --insecure --host 0.0.0.0
#   docker run --rm fedcluster flower-supernode --insecure --superlink HOST:9092 \
#       --node-config 'data-path="/data/data.npy"'
#   docker run --rm fedcluster flower-superexec --help
#   docker run --rm fedcluster fedcluster inspect /results/model.pb
#
# The command picks the role (there is no entrypoint). Everything is installed
# at build time: fedcluster's wheel, built from this context, and the pinned
# dependencies of deploy/requirements.txt. Flower's telemetry, update check and
# run-time dependency installation are off, so nothing is fetched at run time.
#
# BASE_IMAGE is any Debian-like image with python3 (3.11) and its venv module:
# the official Python slim image by default; the tests pass a Debian root file
# system made with debootstrap (tests/harness/docker_build.py), as a machine without a
# container registry must. When deploy/wheels/ holds wheels, pip installs from
# them alone (--no-index) and the build needs no network (docker build
# --network none); otherwise it downloads the pinned versions from PyPI.

ARG BASE_IMAGE=python:3.11-slim

# -- stage 1: the runtime with its pinned dependencies -----------------------------
FROM ${BASE_IMAGE} AS deps
LABEL fedcluster.build=1

# The user the processes run as; compose files may run them as another uid
# (the host user, so that files written to bind mounts belong to them): the
# Flower home and /state (the SuperLink database's volume) are therefore
# writable by every user (sticky, like /tmp).
ARG FLWR_UID=1000
ARG FLWR_GID=1000

ENV PATH=/opt/fedcluster/bin:$PATH \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/flwr \
    FLWR_HOME=/home/flwr/.flwr \
    FLWR_TELEMETRY_ENABLED=0 \
    FLWR_DISABLE_UPDATE_CHECK=1 \
    FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1 \
    UV_OFFLINE=1 \
    RAY_USAGE_STATS_ENABLED=0 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN set -eu; \
    groupadd --gid "${FLWR_GID}" flwr; \
    useradd --uid "${FLWR_UID}" --gid flwr --home-dir /home/flwr --create-home \
        --shell /bin/sh flwr; \
    mkdir -p /home/flwr/.flwr /app /results /data /state; \
    chown flwr:flwr /home/flwr/.flwr /results /state; \
    chmod 1777 /home/flwr /home/flwr/.flwr /state

# Dependencies first: this layer stays cached while only fedcluster changes.
COPY deploy/requirements.txt /tmp/build/requirements.txt
COPY deploy/wheels/ /tmp/build/wheels/
RUN set -eu; \
    if ls /tmp/build/wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1; fi; \
    python3 -m venv /opt/fedcluster; \
    /opt/fedcluster/bin/pip install --quiet --no-cache-dir \
        --find-links /tmp/build/wheels -r /tmp/build/requirements.txt; \
    rm -rf /tmp/build

# -- stage 2: the fedcluster wheel, built from this context ------------------------
FROM ${BASE_IMAGE} AS wheel
LABEL fedcluster.build=1
COPY deploy/build-requirements.txt /build/
COPY deploy/wheels/ /build/wheels/
RUN set -eu; \
    if ls /build/wheels/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1; fi; \
    python3 -m venv /build/venv; \
    /build/venv/bin/pip install --quiet --disable-pip-version-check \
        --find-links /build/wheels -r /build/build-requirements.txt
COPY pyproject.toml README.md /build/src/
COPY fedcluster/ /build/src/fedcluster/
RUN /build/venv/bin/pip wheel --quiet --disable-pip-version-check --no-deps \
        --no-build-isolation --wheel-dir /build/dist /build/src

# -- stage 3: the image: the runtime and fedcluster --------------------------------
FROM deps
COPY --from=wheel /build/dist/ /tmp/dist/
RUN set -eu; \
    /opt/fedcluster/bin/pip install --quiet --no-cache-dir --no-index --no-deps /tmp/dist/*.whl; \
    /opt/fedcluster/bin/pip check; \
    rm -rf /tmp/dist; \
    fedcluster --version; flower-superlink --version

# The Flower app configuration that `flwr run /app` submits (the app bundle
# carries only pyproject.toml and README.md; the code is the installed package).
COPY pyproject.toml README.md /app/
# Helpers of the compose files: demo data, run submission, node registration.
COPY deploy/docker/ /opt/fedcluster/bin/

# numba compiles fedcluster's kernels on first use (tens of seconds): compile
# them here, into a cache that every user may read and add to (numba uses a
# cache folder only where it may write).
ENV NUMBA_CACHE_DIR=/opt/fedcluster/numba-cache
RUN set -eu; \
    mkdir -p "$NUMBA_CACHE_DIR"; \
    fedcluster-warmup; \
    chmod -R a+rwX "$NUMBA_CACHE_DIR"; \
    chmod 1777 "$NUMBA_CACHE_DIR"

WORKDIR /app
USER flwr
# Fleet API (gRPC), Control and Runtime API (HTTP) of a SuperLink.
EXPOSE 9092 8000
CMD ["fedcluster", "--help"]
