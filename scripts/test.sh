#!/usr/bin/env bash
# Set up (idempotently), check, and run the whole test suite on every core; prints how long each part took.
# Arguments go to pytest (`-n 0` runs the suite in one process, `-m "not slow"` the quick part).
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
bash scripts/setup.sh --with-vllm
echo "test: set-up took $((SECONDS - started)) s"

started=$SECONDS
.venv/bin/ruff check .
echo "test: ruff took $((SECONDS - started)) s"

# The type checker over the packages (configured in pyproject.toml, [tool.mypy]) runs beside the suite,
# so the minute it takes with a cold cache overlaps the suite's instead of adding to it; it says its
# result in one line when done, and the command fails if it fails.
mypy_log=$(mktemp)
trap 'rm -f "$mypy_log"' EXIT
(
  started=$SECONDS
  if .venv/bin/python -m mypy > "$mypy_log" 2>&1; then
    echo; echo "test: mypy took $((SECONDS - started)) s: $(tail -n 1 "$mypy_log")"
  else
    echo; cat "$mypy_log"; echo "test: mypy failed"; exit 1
  fi
) &
mypy=$!

# One worker per core; a file's tests stay on one worker, the files of long tests run longest first
# (tests/conftest.py). pytest's last line gives the suite's time.
echo "test: running the suite"
status=0
.venv/bin/python -m pytest -n auto --dist loadgroup "$@" || status=$?
wait "$mypy" || status=1
exit "$status"
