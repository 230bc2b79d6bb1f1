#!/usr/bin/env bash
# Set up offlow on Debian 12 (as root): system packages when missing, a virtualenv
# with the package and its test tools, then run the demo.
#   ./setup.sh              set up and run the demo
#   ./setup.sh --deps-only  set up only (the test command uses this)
set -euo pipefail
cd "$(dirname "$0")"

need=()
for pkg in gcc make libpcap-dev zlib1g-dev pkg-config clang libclang-rt-14-dev \
           libdpdk-dev dpdk-doc memcached libmemcached-tools ucx-utils libucx-dev tshark \
           libbpf-dev libnl-route-3-dev pocl-opencl-icd ocl-icd-opencl-dev \
           opencl-c-headers libssl-dev graphviz valgrind; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || need+=("$pkg")
done
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if ((${#need[@]})); then
    echo "setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ] || [ ! -x .venv/bin/pip ]; then
    python3 -m venv --clear .venv  # (again over one that an interrupted setup left half made)
    rm -f .venv/.offlow-installed
fi
stamp=.venv/.offlow-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/pip install -q --upgrade pip
    .venv/bin/pip install -q -e '.[test,bench]'
    touch "$stamp"
fi

if [ "${1:-}" = "--deps-only" ]; then
    exit 0
fi

data=${OFFLOW_DATA:-../shared/data}  # the shared inputs (OFFLOW_DATA: a checkout elsewhere)
mkdir -p out
echo "== offlow explain examples/ttl_pipeline.py"
.venv/bin/offlow explain examples/ttl_pipeline.py
echo
echo "== offlow run: NIC parses and decrements TTL, host classifies and counts ($data/tls_ciphers.pcap)"
.venv/bin/offlow run examples/ttl_pipeline.py --input "$data/tls_ciphers.pcap" --output out/demo.pcap
echo
echo "== the same program on synthetic traffic to BGP-table destinations, 2 s"
.venv/bin/offlow run examples/ttl_pipeline.py --duration 2 --prefixes "$data/bgp-full-table.txt.gz"
echo
echo "== IPv4/IPv6 router on the full BGP table: lookups on the NIC, 200k synthetic packets"
.venv/bin/offlow run examples/router.py --count 200000 --prefixes "$data/bgp-full-table.txt.gz"
echo
echo "demo done: forwarded packets are in out/demo.pcap"
