#!/usr/bin/env bash
# setup-deps.sh — installs what building and testing theseus needs on Debian
# (idempotent: does nothing when everything is present). Run as root or with sudo.
set -e
PKGS="build-essential pkg-config libpcre2-dev libcjson-dev libutf8proc-dev libmicrohttpd-dev curl python3-pip clang libclang-rt-14-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
missing=""
for p in $PKGS; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup-deps: installing Debian packages:$missing"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi
# The server tests drive `theseus serve` with the official OpenAI client.
if ! python3 -c 'import openai' >/dev/null 2>&1; then
    echo "setup-deps: installing the Python package openai (server tests)"
    python3 -m pip install -q openai || python3 -m pip install -q --break-system-packages openai
fi
# The grammar tests check JSON-schema documents with jsonschema (rfc3339-validator enables its
# date-time and time format checks).
if ! python3 -c 'import jsonschema, rfc3339_validator' >/dev/null 2>&1; then
    echo "setup-deps: installing the Python packages jsonschema rfc3339-validator (grammar tests)"
    python3 -m pip install -q jsonschema rfc3339-validator || \
        python3 -m pip install -q --break-system-packages jsonschema rfc3339-validator
fi
# The tool-call template test renders templates with Python's Jinja2, as Hugging Face does.
if ! python3 -c 'import jinja2' >/dev/null 2>&1; then
    echo "setup-deps: installing the Python package jinja2 (tool-call template test)"
    python3 -m pip install -q jinja2 || python3 -m pip install -q --break-system-packages jinja2
fi
