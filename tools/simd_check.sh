#!/usr/bin/env bash
# The vector check (issue 29): on a machine whose CPU has AVX-512 (the lent H100
# machine's 16-core Xeon; this project's CI machines may have only AVX2), run the tests
# that force every vector path of the LPM lookups and CRC32C (plain and ASan+UBSan),
# then `offlow bench router --sweeps lookups` on the full BGP table beside DPDK's
# rte_lpm/rte_fib (AVX-512 lookups), `offlow bench channels` and `offlow bench queue`,
# and write their results as JSON into OUT.
#
#   tools/simd_check.sh --bundle      as tools/gpu_check.sh --bundle (tools/lent.sh):
#                                     what a bare lent machine lacks, into .lent/
#   tools/simd_check.sh OUT [--quick] the check; --quick: the benches' quick modes
#
# OUT gets: summary.json (the CPU's features, the vector level kernels chose, the tests'
# counts, each bench's verdict lines, elapsed), tests.xml, bench_*.json and the logs.
set -euo pipefail
# shellcheck source=tools/lent.sh
. "$(dirname "$0")/lent.sh"
root=$lent_root

lent_start "OUT [--quick]" "$@"
quick=${2:-}
cd "$root"

status=0
# each step under a time limit of its own (seconds; 0: none), so that a check with a
# budget returns what it reached: OFFLOW_CHECK_LIMITS="ROUTER TESTS CHANNELS QUEUE"
read -r lim_router lim_tests lim_channels lim_queue <<< "${OFFLOW_CHECK_LIMITS:-0 0 0 0}"
q=() pyquick=False
[ "$quick" = "--quick" ] && q=(--quick) pyquick=True
bench() {  # NAME LIMIT ARGS...: offlow bench ARGS into bench_NAME.{json,txt}
    local name=$1 limit=$2
    shift 2
    timeout "$limit" "$python" -u -m offlow.cli bench "$@" "${q[@]}" \
        --json-out "$out/bench_$name.json" > "$out/bench_$name.txt" 2>&1 || status=1
    tail -40 "$out/bench_$name.txt" >> "$out/check.log"
}
# the lookups first: the issue's figures against DPDK's AVX-512 rte_fib/rte_fib6
bench router "$lim_router" router --sweeps lookups
# the tests that force each vector path (a path this CPU lacks is skipped, saying so)
tests=(tests/test_lpm_c.py tests/test_crc32c_c.py tests/test_router.py tests/test_bench_machine.py
       tests/test_runtime_c.py
       -k "vector_paths or brute_force or crc32c or simd_path or machine or misc")
timeout "$lim_tests" "$python" -m pytest -v -rs -p no:cacheprovider --junitxml="$out/tests.xml" \
    "${tests[@]}" > "$out/tests.log" 2>&1 || status=1
{ grep -E "SKIPPED|passed|failed" "$out/tests.log" || true; } | tail -8 | tee -a "$out/check.log"
# channels without installing its UCX peer (there is no package registry there)
timeout "$lim_channels" "$python" -u -c "from benchmarks import channels
channels.run(quick=$pyquick, out_json='$out/bench_channels.json', install=False)" \
    > "$out/bench_channels.txt" 2>&1 || status=1
tail -40 "$out/bench_channels.txt" >> "$out/check.log"
bench queue "$lim_queue" queue

"$python" - "$out" "$status" "$(( $(date +%s) - t0 ))" <<'PY'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path
from benchmarks.common.machine import cpu_features
out, status, elapsed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tests = {}
if (out / "tests.xml").exists():
    s = ET.parse(out / "tests.xml").getroot()
    s = s if s.tag == "testsuite" else s.find("testsuite")
    tests = {k: int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
verdicts = {}
for name in ("router", "channels", "queue"):
    txt = out / f"bench_{name}.txt"
    if txt.exists():
        verdicts[name] = [ln for ln in txt.read_text().splitlines()
                          if "meets" in ln or "misses" in ln or "target" in ln][-12:]
summary = {"ok": status == 0 and tests.get("failures", 1) == 0 and tests.get("errors", 1) == 0,
           "cpu_features": cpu_features(), "tests": tests, "verdicts": verdicts,
           "elapsed_s": elapsed}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
print(json.dumps(summary))
PY
exit $status
