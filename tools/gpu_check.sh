#!/usr/bin/env bash
# The GPU check of the gpu target (issue 27): on a machine with an OpenCL GPU, build
# what the check needs, run the gpu tests, the TSP tests and `offlow bench gpu` and
# `offlow bench tsp` in their quick modes on the card, and write their results as JSON
# into OUT.
#
#   tools/gpu_check.sh --bundle            on a machine with Debian's packages (this
#                                          one): put what a bare lent machine lacks into
#                                          .lent/ (carry it there with the tree;
#                                          tools/lent.sh)
#   tools/gpu_check.sh OUT [--smoke]       on the GPU machine: the check; --smoke: one C
#                                          test, the gpu climber's test, a tiny sweep
#                                          and 500 climbs on the gpu (seconds; the
#                                          suite runs it on PoCL)
#
# What a bare GPU machine (NVIDIA driver, nvcc, gcc, Python 3.12 with numpy, no package
# registry, no libpcap headers) lacks travels in .lent/ (tools/lent.sh says what is
# there and how the check takes it). NVIDIA's OpenCL library is often not
# registered with the ICD loader: the check writes an ICD file of its own naming
# libnvidia-opencl.so.1 (OCL_ICD_VENDORS) and asks for a GPU (OFFLOW_OPENCL_DEVICE=gpu);
# without one it runs on whatever OpenCL device is there (PoCL) and says so.
#
# OUT gets: summary.json (device, tests passed/failed, the gpu bench's best point, the
# gpu climber's time and best length, elapsed), tests.xml (pytest's JUnit report),
# bench_gpu.json, bench_tsp.json (--smoke: tsp_gpu.json, offlow tsp's), and the logs.
set -euo pipefail
# shellcheck source=tools/lent.sh
. "$(dirname "$0")/lent.sh"
root=$lent_root

lent_start "OUT [--smoke]" "$@"
smoke=${2:-}

# OpenCL: NVIDIA's ICD, when its library is here, beside the registered ones
nv=$( (ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/ {print $NF; exit}') || true)
if [ -z "$nv" ]; then
    nv=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 /usr/lib64/libnvidia-opencl.so.1 \
        2>/dev/null | head -1 || true)
fi
if [ -n "$nv" ]; then
    mkdir -p "$out/icd"
    cp /etc/OpenCL/vendors/*.icd "$out/icd/" 2>/dev/null || true
    echo "$nv" > "$out/icd/offlow-nvidia.icd"
    export OCL_ICD_VENDORS="$out/icd"
    export OFFLOW_OPENCL_DEVICE=gpu
    # NVIDIA's driver maps memory where ASan keeps its shadow gap (the C tests' ASan
    # builds then find no GPU), and keeps allocations until exit (not the library's)
    printf 'leak:libnvidia-opencl\nleak:libcuda\n' > "$out/lsan.supp"
    export ASAN_OPTIONS="protect_shadow_gap=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export LSAN_OPTIONS="suppressions=$out/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    note "NVIDIA OpenCL: $nv (OCL_ICD_VENDORS=$out/icd, OFFLOW_OPENCL_DEVICE=gpu)"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
        --format=csv,noheader > "$out/nvidia-smi.txt" 2>&1 || true
else
    note "no NVIDIA OpenCL library: the check runs on the OpenCL device there is (PoCL?)"
fi

cd "$root"
status=0
if [ "$smoke" = "--smoke" ]; then
    tests=(tests/test_gpu.py tests/test_tsp.py -k "(library and plain) or gpu_climber")
    bench=(-c "from benchmarks import gpu; gpu.run(quick=True, out_json='$out/bench_gpu.json',
sweep=gpu.Sweep(routes=2000, batches=(32, 256), depths=(1, 2), lookups=2048, addresses=4096))")
    tsp=(-m offlow.cli tsp --device gpu --climbs 500 --json-out "$out/tsp_gpu.json")
else
    tests=(tests/test_gpu.py tests/test_bench_gpu.py tests/test_tsp.py tests/test_bench_tsp.py)
    bench=(-m offlow.cli bench gpu --quick --json-out "$out/bench_gpu.json")
    tsp=(-m offlow.cli bench tsp --quick --json-out "$out/bench_tsp.json")
fi
"$python" -m pytest -q -p no:cacheprovider --junitxml="$out/tests.xml" "${tests[@]}" \
    > "$out/tests.log" 2>&1 || status=1
tail -3 "$out/tests.log" | tee -a "$out/check.log"
"$python" "${bench[@]}" > "$out/bench_gpu.txt" 2>&1 || status=1
cat "$out/bench_gpu.txt" | tee -a "$out/check.log"
"$python" "${tsp[@]}" > "$out/tsp.txt" 2>&1 || status=1
head -c 4000 "$out/tsp.txt" | tee -a "$out/check.log"

"$python" - "$out" "$status" "$(( $(date +%s) - t0 ))" "$smoke" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path
out, status, elapsed, smoke = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tests = {}
if (out / "tests.xml").exists():
    s = ET.parse(out / "tests.xml").getroot()
    s = s if s.tag == "testsuite" else s.find("testsuite")
    tests = {k: int(s.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
bench = json.loads((out / "bench_gpu.json").read_text()) if (out / "bench_gpu.json").exists() else {}
best = max(bench.get("points", []), key=lambda p: p["lookups"] / p["gpu_s"], default=None)
# the gpu climber: bench tsp's gpu row, or (--smoke) offlow tsp's result
tsp = None
if (out / "bench_tsp.json").exists():
    doc = json.loads((out / "bench_tsp.json").read_text())
    row = min((r for r in doc["rows"] if r["name"].startswith("gpu")),
              key=lambda r: r["median_s"], default=None)
    tsp = row and {"climbs": doc["input"]["climbs"], "seconds": row["median_s"],
                   "best": row["best"], "optimum": doc["input"]["optimum"]}
elif (out / "tsp_gpu.json").exists():
    doc = json.loads((out / "tsp_gpu.json").read_text())
    tsp = {"climbs": doc["climbs"], "seconds": doc["seconds"], "best": doc["length"],
           "optimum": doc["optimum"]}
summary = {"ok": status == 0 and tests.get("failures", 1) == 0 and tests.get("errors", 1) == 0,
           "smoke": smoke == "--smoke", "device": bench.get("device"),
           "tests": tests, "elapsed_s": elapsed, "tsp_gpu": tsp,
           "bench_best": best and {**best, "gpu_mlps": best["lookups"] / best["gpu_s"] / 1e6,
                                   "copy_mlps": best["lookups"] / best["copy_s"] / 1e6,
                                   "gpu_over_copy": best["copy_s"] / best["gpu_s"]}}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
print(json.dumps(summary))
EOF
exit $status
