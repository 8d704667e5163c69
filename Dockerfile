# syntax=docker/dockerfile:1
# kbroker, a Kafka-compatible broker, as a container image:
#
#   docker build -t kbroker .
#   docker run -p 9092:9092 -p 127.0.0.1:9404:9404 kbroker
#
# podman builds it too (BUILDAH_FORMAT=docker keeps the HEALTHCHECK); where Docker Hub is out of
# reach, PYTHON_IMAGE takes a base made from Debian's archive (docs/docker.md).
#
# The HTTP port (9404: /metrics, /health, /ready and the web console) is published on the host's
# loopback only: without an authorizer the console shows every topic's records to whoever
# reaches it. Its write requests (/faults, /nodes) are off here, as metrics.host is 0.0.0.0
# (KAFKA_METRICS_WRITE_ENABLE=true turns them on).
#
# Settings come from environment variables named like the flags' Kafka settings, Kafka-image style
# (KAFKA_LISTENERS, KAFKA_ADVERTISED_LISTENERS, KAFKA_NUM_PARTITIONS, ...; KBROKER_* works too).
# The target "compose-tests" is the integration-test service of docker-compose.yml.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- build: a venv, stripped
FROM ${PYTHON_IMAGE} AS build
# every image and build cache layer of this project carries it (tests/containers prunes by it)
LABEL io.kbroker.project="kbroker"
# strip (binutils) stays in this stage: the compiled extensions ship with their debug symbols
# (uvloop's is 13.6 MB, 1.6 MB without)
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends binutils \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY broker ./broker
# the package and its dependencies in /opt/kbroker, the only directory the broker stage copies;
# Cython sources and C headers go, they are not needed to run
RUN pip wheel --no-cache-dir --wheel-dir /wheels . \
    && python -m venv --without-pip /opt/kbroker \
    && pip --python /opt/kbroker/bin/python install --no-cache-dir --no-index \
        --find-links=/wheels /wheels/kbroker-*.whl \
    && find /opt/kbroker -name '*.so' -exec strip --strip-debug {} + \
    && find /opt/kbroker \( -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.c' \
        -o -name '*.h' \) -delete

# ---------------------------------------------------------------- the compose test service
FROM ${PYTHON_IMAGE} AS compose-tests
LABEL io.kbroker.project="kbroker"
RUN pip install --no-cache-dir kafka-python==3.0.12 pytest==9.2.0
WORKDIR /app
COPY tests/compose ./tests/compose
USER 65534:65534
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
CMD ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/compose"]

# ---------------------------------------------------------------- the broker (default target)
FROM ${PYTHON_IMAGE} AS broker
LABEL io.kbroker.project="kbroker"
# only the venv comes from the build stage: no wheels, no pip cache, no build tool
COPY --from=build /opt/kbroker /opt/kbroker
RUN useradd --system --no-log-init --uid 10001 --user-group --create-home --home-dir /var/lib/kbroker kbroker \
    && install -d -o kbroker -g kbroker /var/lib/kbroker/data

ENV PATH=/opt/kbroker/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_LOG_DIRS=/var/lib/kbroker/data \
    KAFKA_METRICS_HOST=0.0.0.0 \
    KAFKA_METRICS_PORT=9404 \
    KAFKA_LOG_FORMAT=json

USER 10001:10001
WORKDIR /var/lib/kbroker
VOLUME ["/var/lib/kbroker/data"]
# Kafka clients; /metrics, /health and /ready
EXPOSE 9092 9404
# a real Kafka question (ApiVersions to the first listener), then /ready: healthy once the
# coordinators have loaded the committed offsets
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["kbroker", "healthcheck"]
ENTRYPOINT ["kbroker"]
CMD ["start"]
