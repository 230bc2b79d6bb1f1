#!/usr/bin/env bash
# The remote target's speed check (issue 28): on a machine with cores to spare (the
# lent H100 machine's 16 Xeon cores, where this project's 2-CPU machines share both
# sides and both ucx_perftest processes), run `offlow bench remote` (ring bridge beside
# `ucx_perftest -t tag_bw`, the link's round trip beside `-t tag_lat`, bulk transfers,
# the sharded store) and write its results as JSON into OUT.
#
#   tools/remote_check.sh --bundle      as tools/gpu_check.sh --bundle (tools/lent.sh):
#                                       what a bare lent machine lacks (UCX, ucx_perftest,
#                                       ip, ...), into .lent/
#   tools/remote_check.sh OUT [--quick] the check: the quick sweep (its verdicts in about
#                                       a minute), then the full one in the time left;
#                                       --quick: the quick sweep alone
#
# Between two network namespaces joined by a veth pair where they can be made (root, a
# kernel that lets this container make them), else both sides in this namespace over
# 127.0.0.1 (`offlow bench remote --loopback`); summary.json says which and why.
# OFFLOW_CHECK_LIMITS="QUICK FULL" limits each sweep (seconds; default 150 and 360: with the
# build, under the 600 s a lent machine gives one command).
#
# OUT gets: summary.json (the CPU, the path, each sweep's verdicts and its ring, round
# trip and bulk rows in short, elapsed), bench_remote_{quick,full}.{json,txt}, the logs.
set -euo pipefail
# shellcheck source=tools/lent.sh
. "$(dirname "$0")/lent.sh"
root=$lent_root

lent_start "OUT [--quick]" "$@"
quick=${2:-}
cd "$root"

# namespaces where they can be made here, else loopback (and why)
probe=ofl-check-probe$$ loopback=() path=namespaces why=""
if [ "$(id -u)" != 0 ]; then
    why="not root"
elif ! command -v ip >/dev/null; then
    why="no ip (iproute2)"
elif ! why=$(ip netns add "$probe" 2>&1); then
    why="ip netns add: ${why:-refused}"
else
    ip netns del "$probe"
    why=""
fi
if [ -n "$why" ]; then
    loopback=(--loopback) path=loopback
    note "no network namespaces here ($why): both sides over 127.0.0.1 (--loopback)"
fi

read -r lim_quick lim_full <<< "${OFFLOW_CHECK_LIMITS:-150 360}"
status=0
sweep() {  # NAME LIMIT ARGS...: offlow bench remote ARGS into bench_remote_NAME.{json,txt}
    local name=$1 limit=$2
    shift 2
    note "bench remote $name (at most ${limit} s)"
    timeout "$limit" "$python" -u -m offlow.cli bench remote "${loopback[@]}" "$@" \
        --json-out "$out/bench_remote_$name.json" > "$out/bench_remote_$name.txt" 2>&1 \
        || { note "bench remote $name ended with status $?"; status=1; }
    grep -E "^verdict|^round trip" "$out/bench_remote_$name.txt" | tee -a "$out/check.log" || true
}
sweep quick "$lim_quick" --quick
[ "$quick" = "--quick" ] || sweep full "$lim_full"

"$python" - "$out" "$status" "$(( $(date +%s) - t0 ))" "$path" "$why" <<'PY'
import json, sys
from pathlib import Path
from benchmarks.common.machine import cpu_features
out, status, elapsed, path, why = (Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                   sys.argv[4], sys.argv[5])
def short(doc: dict) -> dict:
    """A sweep's verdicts and rows in short (the JSON beside has all)."""
    rows = [{k: r[k] for k in ("ring_size", "batch", "entry_size", "mbs", "ratio")}
            | {"tag_bw_mbs": (r["perftest"] or {}).get("bw_mbs")} for r in doc["rows"]]
    bulk = [{k: r[k] for k in ("direction", "size", "mbs", "ratio")} for r in doc["bulk"]]
    rtt = {k: doc["rtt"][k] for k in ("one_way_p50_us", "rtt_p99_ns", "ratio")}
    rtt["tag_lat_p50_us"] = (doc["rtt"]["perftest"] or {}).get("lat_p50_us")
    return {"verdict": doc["verdict"], "rows": rows, "rtt": rtt, "bulk": bulk,
            "kvs": [{k: r[k] for k in ("where", "ops_per_s")} for r in doc["kvs"]],
            "perftest_missing": doc["perftest_missing"]}
sweeps = {name: short(json.loads((out / f"bench_remote_{name}.json").read_text()))
          for name in ("quick", "full") if (out / f"bench_remote_{name}.json").exists()}
summary = {"ok": status == 0 and bool(sweeps), "cpu_features": cpu_features(),
           "path": path, "no_namespaces_because": why or None, "sweeps": sweeps,
           "elapsed_s": elapsed}
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
print(json.dumps({k: summary[k] for k in ("ok", "path", "elapsed_s")}
                 | {n: s["verdict"] for n, s in sweeps.items()}))
PY
exit $status
