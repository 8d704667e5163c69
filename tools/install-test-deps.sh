#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, and fails loudly if it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[test]'
