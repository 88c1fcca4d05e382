#!/usr/bin/env bash
# Set up (idempotently) and open the app on the shipped example trace (or the files given).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ] && [ -z "${QT_QPA_PLATFORM:-}" ]; then
  echo "app: no display found; running on a virtual X screen (xvfb-run)" >&2
  exec xvfb-run -a -s "-screen 0 1600x1000x24" env QT_QPA_PLATFORM=xcb .venv/bin/moe-inspector "$@"
fi
exec .venv/bin/moe-inspector "$@"
