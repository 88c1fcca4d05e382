#!/usr/bin/env bash
# Set up (idempotently) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-vllm
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
