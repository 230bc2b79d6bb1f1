# What the checks on a lent machine share (sourced by tools/gpu_check.sh,
# tools/simd_check.sh and tools/remote_check.sh): the bundle of what a bare machine lacks, and the environment
# that takes it from there.
#
# A lent machine (the issues' H100 machine: NVIDIA's driver and OpenCL library, nvcc,
# gcc 13, Python 3.12 with numpy, 16 Xeon cores with AVX-512; no package registry, no
# libpcap or DPDK) gets the tree and one bundle carried beside it (.lent/, git-ignored):
#   include/, lib/  libpcap's and OpenCL's headers and link libraries
#   dpdk/           DPDK's headers, the few libraries the lookup bench links (and what
#                   they need), a libdpdk.pc naming just those, and pkg-config itself
#   ucx/            UCX for the remote target and its bench: headers, libraries (and
#                   the transport modules beside them), OpenSSL's headers and a link
#                   library (the machine's own libcrypto.so.3 runs it), ucx_perftest
#                   and iproute2's ip, each with its own libraries (run through the
#                   loader, so that they reach no other program)
#   wheels/         the Python packages offlow and its tests import, beyond numpy
#   data/           the shared inputs (the BGP table, the captures, kroA100.tsp)
# lent_bundle makes it on a Debian machine with the packages (this one); lent_env, on
# the lent machine, points the compiler, the loader, pkg-config and Python at it.

lent_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lent_bundle_dir=${OFFLOW_LENT_BUNDLE:-$lent_root/.lent}
lent_work=${OFFLOW_LENT_WORK:-$lent_root/.lent-work}  # the packages and builds (not OUT)
python=${OFFLOW_PYTHON:-python3}

# copy shared library $1 (a path) into folder $2 with its SONAME and unversioned links
_lent_copy_lib() {
    local real soname base
    real=$(readlink -f "$1")
    cp "$real" "$2/"
    base=$(basename "$real")
    soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
    [ -z "$soname" ] || [ "$soname" = "$base" ] || ln -sf "$base" "$2/$soname"
    local plain=${base%%.so*}.so
    [ "$plain" = "$base" ] || ln -sf "$base" "$2/$plain"
}

# copy the libraries program or library $1 needs (but glibc's own) into folder $2
_lent_copy_needed() {
    ldd "$1" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
        case $(basename "$lib") in
            libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
            *) _lent_copy_lib "$lib" "$2";;
        esac
    done
}

# copy shared library $1 and the libraries it needs (but glibc's own) into folder $2
_lent_copy_closure() {
    _lent_copy_lib "$1" "$2"
    _lent_copy_needed "$1" "$2"
}

# DPDK for `offlow bench router --sweeps lookups` (bench_dpdk_lpm.c): headers, the
# libraries rte_lpm/rte_fib need and the libraries those need, found by ldd of a
# program that links them, and a libdpdk.pc that names only them
_lent_bundle_dpdk() {
    local d=$lent_bundle_dir/dpdk multi libs probe
    multi=$(gcc -print-multiarch)
    mkdir -p "$d/include" "$d/lib" "$d/bin"
    cp -r /usr/include/dpdk "$d/include/"
    cp -r "/usr/include/$multi/dpdk" "$d/include/dpdk-config"
    libs="-lrte_fib -lrte_rib -lrte_lpm -lrte_hash -lrte_rcu -lrte_mempool -lrte_mbuf"
    libs="$libs -lrte_ring -lrte_net -lrte_eal -lrte_kvargs -lrte_telemetry"
    # rte_rib's node pools need a mempool driver, which EAL loads from its plugin folder
    # here and which is not there: linked (not as-needed), it registers itself
    libs="$libs -Wl,--no-as-needed -lrte_mempool_ring -Wl,--as-needed"
    probe=$(mktemp -d)
    echo 'int main(void) { return 0; }' > "$probe/p.c"
    # shellcheck disable=SC2086
    gcc "$probe/p.c" -o "$probe/p" -Wl,--no-as-needed $libs
    ldd "$probe/p" | awk '/librte_/ {print $3}' | while read -r lib; do
        _lent_copy_closure "$lib" "$d/lib"
    done
    rm -rf "$probe"
    cp "$(readlink -f "$(command -v pkgconf)")" "$d/bin/pkg-config"
    _lent_copy_lib "$(ldd "$(command -v pkgconf)" | awk '/libpkgconf/ {print $3}')" "$d/lib"
    mkdir -p "$d/pkgconfig"
    cat > "$d/pkgconfig/libdpdk.pc" <<PC
prefix=\${pcfiledir}/..
Name: DPDK
Description: DPDK's LPM and FIB libraries for offlow's lookup bench (tools/lent.sh)
Version: $(pkg-config --modversion libdpdk)
Libs: -L\${prefix}/lib -Wl,--as-needed $libs
Cflags: -I\${prefix}/include/dpdk -I\${prefix}/include/dpdk-config -include rte_config.h
PC
}

# a program and the libraries it needs, run through the loader with those alone
# (LD_LIBRARY_PATH would reach every program it starts: `ip netns exec` starts others):
# $1 the program's path, $2 the folder for it, its libraries and its wrapper
_lent_wrap_exe() {
    local name
    name=$(basename "$1")
    mkdir -p "$2/lib"
    cp "$1" "$2/lib/$name"
    _lent_copy_needed "$1" "$2/lib"
    cat > "$2/$name" <<SH
#!/bin/sh
# $name from the bundle (tools/lent.sh): its own libraries, for it alone
here=\$(dirname "\$(readlink -f "\$0")")
exec /lib64/ld-linux-x86-64.so.2 --library-path "\$here/lib" "\$here/lib/$name" "\$@"
SH
    chmod +x "$2/$name"
}

# UCX (the remote target: runtime/lib/remote), OpenSSL's headers, ucx_perftest and ip
_lent_bundle_ucx() {
    local d=$lent_bundle_dir/ucx multi
    multi=$(gcc -print-multiarch)
    mkdir -p "$d/include" "$d/lib/ucx" "$d/ssl/include" "$d/ssl/lib"
    cp -r /usr/include/ucp /usr/include/uct /usr/include/ucs /usr/include/ucm "$d/include/"
    _lent_copy_closure "/usr/lib/$multi/libucp.so" "$d/lib"
    _lent_copy_lib "/usr/lib/$multi/libucs_signal.so.0" "$d/lib" 2>/dev/null || true
    # UCX loads its transports from the folder `ucx` beside libucs (TCP is in libuct)
    cp -P "/usr/lib/$multi"/ucx/libuct_cma.so* "$d/lib/ucx/"
    cp -r /usr/include/openssl "$d/ssl/include/"
    cp -r "/usr/include/$multi/openssl/." "$d/ssl/include/openssl/"
    cp "$(readlink -f "/usr/lib/$multi/libcrypto.so")" "$d/ssl/lib/"
    ln -sf "$(basename "$(readlink -f "/usr/lib/$multi/libcrypto.so")")" "$d/ssl/lib/libcrypto.so"
    _lent_wrap_exe "$(command -v ucx_perftest)" "$d/perftest"
    _lent_wrap_exe "$(command -v ip)" "$d/ip"
}

# make the bundle (on a machine with Debian's packages)
lent_bundle() {
    rm -rf "$lent_bundle_dir"
    mkdir -p "$lent_bundle_dir/include" "$lent_bundle_dir/lib" "$lent_bundle_dir/wheels" \
        "$lent_bundle_dir/data"
    cp -r /usr/include/pcap /usr/include/pcap.h /usr/include/CL "$lent_bundle_dir/include/"
    local multi lib
    multi=$(gcc -print-multiarch)
    for lib in libpcap.so libOpenCL.so; do  # (libpcap needs libdbus, absent there)
        _lent_copy_closure "/usr/lib/$multi/$lib" "$lent_bundle_dir/lib"
    done
    _lent_bundle_dpdk
    _lent_bundle_ucx
    # offlow's dependencies (pyproject.toml) but numpy, which the machine has, and pytest
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        -d "$lent_bundle_dir/wheels" pytest iniconfig packaging pluggy pygments pycparser \
        dpkt setuptools pyyaml datasketches prometheus-client graphviz
    local data=${OFFLOW_DATA:-$lent_root/../shared/data}
    cp "$data/bgp-full-table.txt.gz" "$data/tls_ciphers.pcap" "$data/quic.pcap" \
        "$data/kroA100.tsp" "$lent_bundle_dir/data/"
    du -sh "$lent_bundle_dir"
}

# append $2 to the front of the path-list variable $1
_lent_add_path() { export "$1"="$2${!1:+:${!1}}"; }
_lent_probe() { echo "#include <$1>" | gcc -E -x c - >/dev/null 2>&1; }

# UCX, OpenSSL's headers, ucx_perftest and ip from the bundle, each where it is missing
_lent_env_ucx() {
    local d=$lent_bundle_dir/ucx
    [ -d "$d" ] || return 0
    if ! _lent_probe ucp/api/ucp.h; then
        _lent_add_path CPATH "$d/include"
        _lent_add_path LIBRARY_PATH "$d/lib"
        _lent_add_path LD_LIBRARY_PATH "$d/lib"
        note "UCX from $d"
    fi
    if ! _lent_probe openssl/evp.h; then
        _lent_add_path CPATH "$d/ssl/include"
        note "OpenSSL's headers from $d/ssl"
    fi
    case $(gcc -print-file-name=libcrypto.so) in
        /*) ;;
        *) _lent_add_path LIBRARY_PATH "$d/ssl/lib"   # (to link; it runs the machine's)
           note "libcrypto.so to link with from $d/ssl/lib";;
    esac
    local exe
    for exe in ucx_perftest ip; do
        if ! command -v "$exe" >/dev/null; then
            _lent_add_path PATH "$d/${exe#ucx_}"
            note "$exe from $d/${exe#ucx_}"
        fi
    done
}

# on the lent machine: a log (note), headers, libraries, DPDK, Python and the data from
# the bundle where the machine lacks them; $1: the check's output folder
lent_env() {
    lent_out=$1
    mkdir -p "$lent_out" "$lent_work"
    : > "$lent_out/check.log"
    if ! _lent_probe pcap.h || ! _lent_probe CL/cl.h; then
        [ -d "$lent_bundle_dir/include" ] || { note "no pcap.h or CL/cl.h here and no bundle" \
            "at $lent_bundle_dir (make it with tools/gpu_check.sh --bundle)"; return 1; }
        _lent_add_path CPATH "$lent_bundle_dir/include"
        note "headers from $lent_bundle_dir/include"
    fi
    local lib
    for lib in libpcap.so libOpenCL.so; do
        case $(gcc -print-file-name=$lib) in
            /*) ;;
            *) _lent_add_path LIBRARY_PATH "$lent_bundle_dir/lib"
               _lent_add_path LD_LIBRARY_PATH "$lent_bundle_dir/lib"
               note "$lib from $lent_bundle_dir/lib";;
        esac
    done
    if ! pkg-config --exists libdpdk 2>/dev/null && [ -d "$lent_bundle_dir/dpdk" ]; then
        _lent_add_path PATH "$lent_bundle_dir/dpdk/bin"
        _lent_add_path LD_LIBRARY_PATH "$lent_bundle_dir/dpdk/lib"
        export PKG_CONFIG_LIBDIR=$lent_bundle_dir/dpdk/pkgconfig
        note "DPDK $(pkg-config --modversion libdpdk) from $lent_bundle_dir/dpdk"
    fi
    _lent_env_ucx
    if ! "$python" -c "import pytest, pycparser, dpkt, numpy, yaml, graphviz, datasketches, \
prometheus_client" 2>/dev/null; then
        [ -d "$lent_bundle_dir/wheels" ] || { note "Python lacks offlow's packages and there" \
            "is no bundle"; return 1; }
        # into a folder of their own on PYTHONPATH: beside whatever interpreter has numpy
        # (there, a venv of torch's: a venv made from it would not see its packages)
        "$python" -m pip install -q --upgrade --no-index --no-deps --target "$lent_work/site" \
            "$lent_bundle_dir"/wheels/*.whl
        _lent_add_path PYTHONPATH "$lent_work/site"
        note "Python packages from $lent_bundle_dir/wheels into $lent_work/site"
    fi
    export PYTHONPATH="$lent_root${PYTHONPATH:+:$PYTHONPATH}"
    export OFFLOW_CACHE="${OFFLOW_CACHE:-$lent_work/cache}"  # (builds of this check)
    if [ -z "${OFFLOW_DATA:-}" ]; then
        if [ -f "$lent_root/../shared/data/bgp-full-table.txt.gz" ]; then
            export OFFLOW_DATA=$lent_root/../shared/data
        else
            export OFFLOW_DATA=$lent_bundle_dir/data
        fi
    fi
    note "python $("$python" -c 'import sys; print(sys.version.split()[0])'), data $OFFLOW_DATA"
}

# the start every check shares: `--bundle` makes the bundle and exits; else the first
# argument is the output folder (into $out), the clock starts ($t0), lent_env runs and
# the CPU's features are noted;
# $1: the check's usage after its name, then the check's own arguments
lent_start() {
    local usage=$1
    shift
    if [ "${1:-}" = "--bundle" ]; then
        lent_bundle
        exit 0
    fi
    [ $# -ge 1 ] || { echo "usage: $0 $usage | --bundle" >&2; exit 2; }
    out=$(realpath -m "$1")
    t0=$(date +%s)
    lent_env "$out"
    note "CPU: $("$python" -c 'from benchmarks.common.machine import cpu_features as f
print(" ".join(f()))'), $(nproc) CPUs"
}

# a line of the check's log (and of its output)
note() {
    if [ -n "${lent_out:-}" ]; then echo "$(basename "$0"): $*" | tee -a "$lent_out/check.log"
    else echo "$(basename "$0"): $*" >&2; fi
}
