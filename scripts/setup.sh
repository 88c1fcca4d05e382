#!/usr/bin/env bash
# Idempotent set-up: system libraries Qt needs, a .venv, CPU torch, the project in editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1 libdbus-1-3 libglib2.0-0
  libcairo2 fonts-dejavu-core xvfb xauth libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-image0
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
# torch first, the build this machine can use: with an NVIDIA GPU the CUDA build (the default index
# serves it on Linux), else the CPU build from PyTorch's CPU wheel index when it answers within a few
# seconds (an open range from the default index would pull the multi-GB CUDA build), else the default.
TORCH="torch==2.13.0"
CPU_INDEX=https://download.pytorch.org/whl/cpu
has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  if has_gpu; then
    echo "setup: NVIDIA GPU found: installing torch's CUDA build"
    "$VPY" -m pip install -q "$TORCH"
  elif command -v curl >/dev/null 2>&1 && curl -sf -m 5 -o /dev/null "$CPU_INDEX/torch/"; then
    echo "setup: installing torch's CPU build from $CPU_INDEX"
    "$VPY" -m pip install -q --index-url "$CPU_INDEX" --extra-index-url https://pypi.org/simple "$TORCH"
  else
    echo "setup: $CPU_INDEX did not answer within 5 s: installing $TORCH from the default index"
    "$VPY" -m pip install -q "$TORCH"
  fi
  "$VPY" -c "import torch; print('setup: installed torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU build)')"
elif has_gpu && "$VPY" -c "import sys, torch; sys.exit(bool(torch.version.cuda))"; then
  echo "setup: an NVIDIA GPU is present but .venv holds torch's CPU build; remove .venv to install the CUDA build" >&2
fi
stamp=.venv/.moe-inspector-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  "$VPY" -m pip install -q -e ".[test]"
  touch "$stamp"
fi
