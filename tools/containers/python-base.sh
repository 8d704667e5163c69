#!/usr/bin/env bash
# Writes to stdout a root filesystem (tar) standing in for python:3.11-slim-bookworm, made from
# Debian's archive with mmdebstrap, for machines that cannot reach Docker Hub:
#
#   bash tools/containers/python-base.sh | podman import --change 'CMD ["python3"]' - localhost/python-bookworm
#   podman build --build-arg PYTHON_IMAGE=localhost/python-bookworm -t kbroker .
#
# Debian's python3 (3.11 in bookworm) with pip, `python` and CA certificates; no docs, man pages,
# locales or apt lists. EXTERNALLY-MANAGED is removed so that `pip install` works as in the python
# image. The machine's extra CA certificates (/usr/local/share/ca-certificates/*.crt) go in too:
# where downloads pass a TLS-intercepting proxy, pip in the image trusts it as the machine does.
set -euo pipefail
suite=bookworm
mirror=http://deb.debian.org/debian
exec mmdebstrap --quiet --variant=minbase \
    --include=python3,python3-pip,python-is-python3,ca-certificates \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --customize-hook='for crt in /usr/local/share/ca-certificates/*.crt; do [ -f "$crt" ] && cp "$crt" "$1/usr/local/share/ca-certificates/"; done; chroot "$1" update-ca-certificates >/dev/null 2>&1' \
    --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
    "$suite" - \
    "deb $mirror $suite main" \
    "deb $mirror $suite-updates main" \
    "deb http://deb.debian.org/debian-security $suite-security main"
