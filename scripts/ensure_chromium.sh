#!/usr/bin/env bash
# Make sure Debian's Chromium (and its driver) is installed for the browser tests.
# Idempotent: does nothing when /usr/bin/chromium exists; never downloads a browser elsewhere.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "ensure_chromium: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium) is installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "ensure_chromium: /usr/bin/chromium is missing and this user cannot run apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "ensure_chromium: /usr/bin/chromium is missing: installing Debian's chromium and" \
     "chromium-driver with apt-get (~100 MB download)"
$SUDO apt-get update
$SUDO apt-get install -y -o Dpkg::Progress-Fancy=0 chromium chromium-driver
test -x /usr/bin/chromium
echo "ensure_chromium: installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
