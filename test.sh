#!/usr/bin/env bash
# Run the whole test suite: lint, then pytest (C runtime tests plain and under
# ASan+UBSan, fuzz targets, compiler passes, end-to-end runs), one pytest worker per
# CPU (at most 4; OFFLOW_TEST_WORKERS=N to choose, 0 for one process), each test
# file on one worker (its module fixtures are built once).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --deps-only
.venv/bin/ruff check offlow benchmarks tests examples
workers=${OFFLOW_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
.venv/bin/pytest -q -n "$workers" --dist loadfile "$@"
