#!/usr/bin/env bash
# Set up (idempotently), check, and run the whole test suite on every core; prints how long each part took.
# Arguments go to pytest (`-n 0` runs the suite in one process, `-m "not slow"` the quick part).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
bash scripts/setup.sh --with-vllm
setup_s=$((SECONDS - started))
echo "test: set-up took ${setup_s} s"

started=$SECONDS
.venv/bin/ruff check .
# The type checker over the packages (configured in pyproject.toml, [tool.mypy]).
.venv/bin/python -m mypy
checks_s=$((SECONDS - started))
echo "test: ruff and mypy took ${checks_s} s"

# One worker per core; the tests of a file stay on one worker, the Qt tests and the vLLM tests each on
# one (their groups: tests/conftest.py). pytest's last line gives the suite's time.
echo "test: running the suite"
exec .venv/bin/python -m pytest -n auto --dist loadgroup "$@"
