#!/usr/bin/env bash
# Idempotent set-up: system libraries Qt needs, a .venv, CPU torch, the project in editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 libglib2.0-0
  fonts-dejavu-core xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-image0
  libxcb-render-util0 libxcb-randr0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${missing[@]}" >/dev/null; }
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
VPY=.venv/bin/python
# A CPU build of torch first: an open range would pull a multi-GB CUDA build.
"$VPY" -c "import torch" >/dev/null 2>&1 || "$VPY" -m pip install -q "torch==2.13.0"
stamp=.venv/.moe-inspector-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$VPY" -m pip install -q -e ".[test]"
  touch "$stamp"
fi
