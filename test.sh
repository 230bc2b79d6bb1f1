#!/usr/bin/env bash
# Run the whole test suite: lint, then pytest (C runtime tests plain and under
# ASan+UBSan, fuzz targets, compiler passes, end-to-end runs), one pytest worker per
# CPU (at most 4; OFFLOW_TEST_WORKERS=N to choose, 0 for one process), each test
# file on one worker (its module fixtures are built once).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh --deps-only
.venv/bin/ruff check offlow benchmarks tests examples
# Most tests start offlow's command line in a process of its own: let Python keep its
# compiled modules (beside the build cache, not in it nor in the tree) even where the
# environment says not to write them (PYTHONDONTWRITEBYTECODE: each start would compile
# offlow's ~130 modules again, about 0.3 s of a 1.2 s `offlow run`)
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/offlow-pycache}
workers=${OFFLOW_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}
.venv/bin/pytest -q -n "$workers" --dist loadfile "$@"
