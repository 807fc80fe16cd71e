#!/usr/bin/env bash
# Install the Debian packages the suite needs when they are missing:
#  - Qt's offscreen platform (tests) and its xcb platform (the apps on a real X
#    desktop): the X11 list of "Qt for X11 Requirements" for Qt 6, which the
#    PySide6 wheels do not ship (libxcb-cursor0 is new in Qt 6.5);
#  - a JRE for Spark;
#  - Xvfb and xdotool, so the tests can start an app on a real X server;
#  - gdbus (the biff's desktop notifications) and dbus-daemon (their tests);
#  - python3-venv, for `make`'s virtualenvs with Debian's Python;
#  - systemd, for `systemd-analyze verify` of the units in packaging/systemd.
# Idempotent: it asks apt only for what dpkg does not already have.
set -euo pipefail
qt_common=(libegl1 libgl1 libopengl0 libxkbcommon0 libfontconfig1 libfreetype6 libglib2.0-0
           libdbus-1-3 fonts-dejavu-core)
qt_xcb=(libx11-6 libx11-xcb1 libxext6 libxrender1 libxi6 libsm6 libice6 libxcb1
        libxcb-cursor0 libxcb-glx0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1
        libxcb-randr0 libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0
        libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xinerama0 libxcb-xinput0
        libxcb-xkb1 libxkbcommon-x11-0)
wanted=("${qt_common[@]}" "${qt_xcb[@]}" openjdk-17-jre-headless xvfb xauth xdotool
        libglib2.0-bin dbus-daemon python3-venv systemd)
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
# -n: never wait for a password (CI has no terminal); env: sudo drops the variable
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo -n"; fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
