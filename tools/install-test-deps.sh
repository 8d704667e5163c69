#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, and fails loudly if it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[test]'

# kcat (Debian's build of librdkafka's CLI) for tests/integration/test_kcat.py
if ! command -v kcat >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq kcat
fi
