#!/usr/bin/env bash
# Install the Debian packages the suite needs at run time (Qt's offscreen
# platform libraries, a JRE for Spark) when they are missing. Idempotent: it
# asks apt only for what dpkg does not already have.
set -euo pipefail
wanted=(libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libglib2.0-0
        libdbus-1-3 fonts-dejavu-core openjdk-17-jre-headless)
missing=()
for pkg in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "Installing system packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
