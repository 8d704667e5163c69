# syntax=docker/dockerfile:1
# kbroker, a Kafka-compatible broker, as a container image:
#
#   docker build -t kbroker .
#   docker run -p 9092:9092 -p 127.0.0.1:9404:9404 kbroker
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

# ---------------------------------------------------------------- build: wheels only
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY broker ./broker
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# ---------------------------------------------------------------- the compose test service
FROM ${PYTHON_IMAGE} AS compose-tests
RUN pip install --no-cache-dir kafka-python==3.0.12 pytest==9.2.0
WORKDIR /app
COPY tests/compose ./tests/compose
USER 65534:65534
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
CMD ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/compose"]

# ---------------------------------------------------------------- the broker (default target)
FROM ${PYTHON_IMAGE} AS broker
# the wheels are mounted from the build stage, so neither they nor any build tool end up here
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/kbroker-*.whl \
    && useradd --system --no-log-init --uid 10001 --user-group --create-home --home-dir /var/lib/kbroker kbroker \
    && install -d -o kbroker -g kbroker /var/lib/kbroker/data

ENV PYTHONUNBUFFERED=1 \
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
# a real Kafka question: ApiVersions to the first listener
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["kbroker", "healthcheck"]
ENTRYPOINT ["kbroker"]
CMD ["start"]
