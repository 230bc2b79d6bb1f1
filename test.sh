#!/usr/bin/env bash
# Run the whole test suite: lint, then pytest (C runtime tests plain and under
# ASan+UBSan, fuzz targets, compiler passes, end-to-end runs).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --deps-only
.venv/bin/ruff check offlow benchmarks tests examples
.venv/bin/pytest -q "$@"
