"""The command line: parses arguments and calls the library; nothing more."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offlow import remote, targets
from offlow.argtypes import (
    PORT_OR_FREE,
    SEED,
    U64_MAX,
    BadValue,
    File,
    Folder,
    NewFile,
    Refused,
    Whole,
    rate,
    refusal,
    seconds,
)
from offlow.errors import OfflowError
from offlow.lifecycle import Terminated, signals_deferred, stop_signals
from offlow.planner import presets
from offlow.planner.request import PlanRequest
from offlow.router import MAX_HOP
from offlow.router import check_args as router_check_args

if TYPE_CHECKING:
    from offlow.control import RouteChange, Table, Tables


def _cmd_explain(a: argparse.Namespace) -> int:
    from offlow import picture
    from offlow.build import plan_program
    from offlow.dsl.loader import load_program
    from offlow.explain import explain
    from offlow.runner import RunOptions, check_options

    if a.svg is not None:
        picture.check_target(a.svg)
    prog = load_program(a.program, a.set)
    fit = check_options(RunOptions(input=a.input)) if a.input else None
    plan = plan_program(prog, fit)
    print(explain(plan))
    if a.svg is not None:
        picture.write_svg(plan, a.svg)
        print(f"\npicture: {a.svg}")
    return 0


def _cmd_targets(a: argparse.Namespace) -> int:
    rows = targets.listing()
    print(json.dumps(rows, indent=2) if a.json else targets.format_listing(rows))
    return 0


def _cmd_serve_device(a: argparse.Namespace) -> int:
    return remote.serve_device(a.listen, a.secret_file, a.all_interfaces, a.work_dir)


def _cmd_run(a: argparse.Namespace) -> int:
    from offlow import jsontext
    from offlow.dsl.loader import load_program
    from offlow.report import format_summary, packets_flowed, summarize
    from offlow.runner import EMULATED, RunOptions, build_for, emulation_note, run

    prog = load_program(a.program, a.set)
    opts = RunOptions(input=a.input, output=a.output, duration=a.duration, loops=a.loops,
                      udp_port=a.udp, tcp_port=a.tcp, serve=a.serve,
                      rate=a.rate, count=a.count, sizes=a.sizes, prefixes=a.prefixes,
                      seed=a.seed, copy_engine=a.copy_engine, timeout=a.timeout,
                      opts=tuple(a.opt), profile=a.profile or "", metrics=a.metrics,
                      ports=tuple(a.port), iface=a.iface, xdp_mode=a.xdp_mode,
                      xdp_ring=a.xdp_ring, xdp_spread=a.xdp_spread,
                      remotes=tuple(a.remote), secret_file=a.secret_file,
                      window_file=a.window_file)
    if a.no_cache:  # (the environment: the build, and tools it starts, read it there)
        from offlow import buildcache

        os.environ[buildcache.NO_CACHE] = "1"
    b = build_for(prog, opts)
    if a.serve and not b.plan.program_channels:
        raise OfflowError(f"program `{b.graph.name}` has no channels to serve "
                          "(Program.channel) and no tables to control")
    res = run(b, opts, progress=True)
    summary = summarize(b.plan, res.stats)
    summary["ok"] = res.ok
    summary["errors"] = res.errors
    summary["warnings"] = res.warnings
    summary["interrupted"] = res.interrupted
    if res.tcp is not None:
        summary["tcp"] = res.tcp
    if a.json:
        print(jsontext.dumps(summary))  # (a shared array's numbers on one line)
    elif res.ok or packets_flowed(summary):  # (a run that failed before any: its error only)
        print(format_summary(summary))
    if a.profile:
        print(f"offlow: {EMULATED} ran at the speed of profile {a.profile}: "
              + emulation_note(res.stats.get(EMULATED, {})), file=sys.stderr)
    if res.interrupted:
        by = "SIGTERM" if res.stopped_by == "SIGTERM" else "Ctrl-C"
        print(f"offlow: stopped by {by}: the counts cover the run until then",
              file=sys.stderr)
    for err in res.errors:
        print(f"offlow: error: {err}", file=sys.stderr)
    return 0 if res.ok else 1


def _cmd_cache(a: argparse.Namespace) -> int:
    from offlow import buildcache

    if a.cache_cmd == "info":
        i = buildcache.info()
        print(f"folder   {i.folder}" + ("" if i.offlows else
                                       f" (not offlow's: no {buildcache.TAG}; never pruned)"))
        print(f"entries  {i.entries}")
        print(f"size     {buildcache.format_size(i.size)}")
        print(f"limit    {buildcache.format_size(i.limit) if i.limit else 'none'} "
              f"(${buildcache.MAX})")
        return 0
    limit = 0 if a.cache_cmd == "clear" else (
        None if a.max is None else buildcache.parse_size(a.max, "--max"))
    r = buildcache.prune(limit)
    print(f"removed {r.removed} entries ({buildcache.format_size(r.freed)}); "
          f"{r.kept} left ({buildcache.format_size(r.size)})"
          + (f", {r.busy} of them used in the last {buildcache.GRACE_S // 60} minutes "
             "or being built (kept: maybe in use)" if r.busy else ""))
    return 0


def _cmd_plan(a: argparse.Namespace) -> int:
    from offlow.planner import plan as planner

    if a.repeats is not None and not a.validate:
        raise OfflowError(f"--repeats {a.repeats}: goes with --validate (without it nothing "
                          "is measured)")
    print(planner.plan(PlanRequest(
        program=a.program, device=a.device, host=a.host, workload=a.workload,
        settings=tuple(a.set), alternatives=tuple(a.alt), work=tuple(a.work),
        packets=a.packets, top=a.top, validate=a.validate,
        repeats=PlanRequest.repeats if a.repeats is None else a.repeats,
        progress=lambda what: print(f"offlow plan: {what}", file=sys.stderr, flush=True))))
    return 0


def _cmd_stats(a: argparse.Namespace) -> int:
    import time

    from offlow import live, metrics

    printed, hdr = False, live.header()
    while True:
        try:
            print(metrics.exposition(live.read(a.window, hdr=hdr)), flush=True)
        except OfflowError as e:
            if not printed:
                raise
            print(f"offlow: stopped: {e}", file=sys.stderr)  # the run has ended
            return 0
        if a.every is None:
            return 0
        printed = True
        time.sleep(a.every)


PCSA_DISTINCT, PCSA_PACKETS = 100_000, 200_000  # offlow pcsa's generated stream


def _cmd_pcsa(a: argparse.Namespace) -> int:
    # (a test input by nature: without --input the command checks the sketch against
    # a stream whose distinct count is known, as users test their own programs with
    # offlow.testing; tests/test_layout.py allows this one use)
    import tempfile

    from offlow.sketch import app
    from offlow.testing.streams import distinct_sources_pcap

    if a.input is not None and (a.distinct is not None or a.packets is not None):
        raise OfflowError("--distinct and --packets size the generated stream: with --input, "
                          "the capture's sources are counted")
    distinct = PCSA_DISTINCT if a.distinct is None else a.distinct
    packets = PCSA_PACKETS if a.packets is None else a.packets
    if a.input is None and distinct > packets:
        raise OfflowError(f"--distinct {distinct:,}: more distinct sources than --packets "
                          f"{packets:,} can carry")
    with tempfile.TemporaryDirectory(prefix="offlow-pcsa-") as d:
        capture = a.input
        if capture is None:
            capture = Path(d) / "sources.pcap"
            distinct_sources_pcap(capture, distinct, packets)
            print(f"generated {packets:,} packets from {distinct:,} distinct IPv4 sources")
        print(app.format_result(app.run(capture)))
    return 0


def _cmd_router_check(a: argparse.Namespace) -> int:
    from offlow.router import check

    return check.cli(a)


def _cmd_kvs(a: argparse.Namespace) -> int:
    if a.tool == "interop":
        from offlow.kvs import interop

        return interop.main()
    from offlow.kvs import quick

    return quick.cli(a)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, when it has one worth showing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False, [], argparse.SUPPRESS) or "%(default)" in (
                action.help or "") or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="offlow", description="Compile packet-processing programs (a data-flow graph of "
        "elements with C bodies) and run them split between the host CPU and devices (an "
        "emulated NIC, XDP, OpenCL, remote devices over UCX). README.md and docs/ say more.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_SubParser)

    def secret_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--secret-file", type=File(), metavar="FILE",
                        help="the remote devices' shared secret (16..4096 bytes; mode 0600); "
                             "else OFFLOW_REMOTE_SECRET")
        sp.add_argument("--secret", type=Refused(remote.ON_COMMAND_LINE), help=argparse.SUPPRESS)

    def program_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("program", type=File(), help="a Python file defining program()")
        sp.add_argument("--set", action="append", default=[], metavar="SEG.ATTR=VALUE",
                        help="change placement (rx.device=host, rx.cores=0,1; on gpu "
                             "the offload batch and batches in flight: route.batch=1024, "
                             "route.depth=3) or queues "
                             "(ring_size=256, batch=64, mtu=9018). mtu: the largest frame in "
                             "bytes, Ethernet header included (64..65535); longer frames are "
                             "dropped and counted at the source. A program that sets none "
                             "(or mtu=auto) is sized to its input: 2048, raised to the "
                             "longest frame of --input or the largest of --sizes; queue "
                             "entries reserve room for a whole frame")

    ex = sub.add_parser("explain", help="show the compiled design")
    program_args(ex)
    ex.add_argument("--input", type=File(),
                    help="size the queues to this capture as `run --input` does (else the "
                         "program's mtu, or 2048)")
    ex.add_argument("--svg", type=NewFile(), metavar="FILE",
                    help="also draw the design into FILE (SVG, by Graphviz's dot): elements "
                         "in a box per segment coloured by device, queue edges labelled with "
                         "the fields and bytes per packet that cross them, tables beside the "
                         "segments that use them")
    ex.set_defaults(fn=_cmd_explain)

    tg = sub.add_parser("targets", help="list the device targets, whether each is usable "
                        "here and why not")
    tg.add_argument("--json", action="store_true", help="print them as JSON")
    tg.set_defaults(fn=_cmd_targets)

    r = sub.add_parser("run", help="compile and run a program")
    program_args(r)
    r.add_argument("--input", type=File(), help="pcap file for the sources (else synthetic)")
    r.add_argument("--output", type=NewFile(),
                   help="pcap file for the sink (with several sinks: OUTPUT.SINK.pcap each)")
    r.add_argument("--duration", type=seconds(), help="seconds to run (replays the input)")
    r.add_argument("--loops", type=Whole(1, U64_MAX), default=1,
                   help="replays of the input (default 1)")
    r.add_argument("--rate", type=rate("packets/s"), default=0.0,
                   help="packets/s per source core (0: as fast as possible)")
    r.add_argument("--count", type=Whole(0, U64_MAX), default=10000,
                   help="synthetic packets per replay")
    r.add_argument("--sizes", default="64:7,576:4,1500:1", help="synthetic size:weight mix")
    r.add_argument("--prefixes", type=File(), help="synthetic destination prefixes file")
    r.add_argument("--seed", type=SEED, default=1,
                   help="seed of the synthetic traffic (the same seed, the same packets)")
    r.add_argument("--copy-engine", choices=["inline", "thread"], default="inline",
                   help="the copy engine: inline (copies when a batch is submitted) or on a "
                        "thread of its own")
    r.add_argument("--timeout", type=seconds(), help="kill the run after this many seconds")
    r.add_argument("--opt", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="a run-time option of a source, sink or table (e.g. routes.path=F); "
                        "a source or sink that reads no such KEY refuses it")
    r.add_argument("--port", action="append", default=[], metavar="[NAME=]KIND:ARGS",
                   help="put the sources and sinks (or only NAME) on a network port, until "
                        "--duration: dpdk:ARGS (DPDK ethdev: EAL vdev arguments such as "
                        "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap or net_af_packet0,"
                        "iface=eth1, or a PCI address) or afpacket:IFACE (a Linux interface); "
                        "docs/ports.md")
    r.add_argument("--udp", type=PORT_OR_FREE, metavar="PORT",
                   help="serve UDP clients on 127.0.0.1:PORT (0: a free port): every source "
                        "reads datagrams, every sink sends replies; until --duration or Ctrl-C")
    r.add_argument("--tcp", type=PORT_OR_FREE, metavar="PORT",
                   help="also serve TCP on 127.0.0.1:PORT (0: a free port) from the program's "
                        "table that serves it (kv_store: memcached over TCP, any value up to "
                        "its value_max); UDP is served too (without --udp: a free port)")
    r.add_argument("--serve", action="store_true",
                   help="after the packets, keep serving the program's channels until Ctrl-C: "
                   "other host programs attach with offlow.session.attach(WINDOW), the path "
                   "it prints, and change its tables with offlow ctl WINDOW")
    r.add_argument("--iface", metavar="IFACE",
                   help="xdp: attach the program to this existing interface (its traffic is "
                        "the input, until --duration or Ctrl-C) instead of the run's own veth "
                        "pair")
    r.add_argument("--xdp-mode", choices=["generic", "native", "offload"], default="generic",
                   help="xdp: generic (any interface, in the kernel's stack) or native (in "
                        "the driver: veth and most 10-100G NICs); default generic; "
                        "offload (on the NIC itself) is refused with the reason")
    r.add_argument("--xdp-ring", type=Whole(0, 1 << 14), default=0, metavar="N",
                   help="xdp with segments on other devices: entries of the AF_XDP socket's "
                        "ring (a power of 2; default 1024)")
    r.add_argument("--xdp-spread", action="store_true",
                   help="xdp with the run's own veth pair: send each frame of the input "
                        "from the next CPU, as a NIC spreads flows over CPUs, so XDP runs "
                        "on each (default: from the CPU the run's xdp process is on)")
    r.add_argument("--profile", metavar="PROFILE",
                   help="profile-scaled emulation: run the device `nic` at a device profile's "
                        "speed (a preset of offlow plan --device, or a YAML file): each turn "
                        "of its cores that moves packets is stretched by the profile's "
                        "slow-down for each kind of work (docs/planner.md)")
    r.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve the run's counters in the Prometheus text format on "
                        "HOST:PORT while it runs (e.g. 127.0.0.1:9100; port 0: a free one, "
                        "printed at start) and a live page at / (the design's picture with "
                        "its rates, every second); docs/metrics.md lists the metrics")
    r.add_argument("--remote", action="append", default=[], metavar="NAME=ADDR:PORT",
                   help="where device remote:NAME's `offlow serve-device` listens "
                        "(docs/remote.md)")
    secret_args(r)
    r.add_argument("--window-file", type=NewFile(), metavar="PATH",
                   help="once the processes are started (when `offlow: running` is "
                        "printed), write PATH, JSON for tools: the run's window (what "
                        "`offlow stats` takes), offlow's pid, the program's name and the "
                        "devices running; written to PATH.tmp and renamed, left when the "
                        "run ends (docs/metrics.md)")
    r.add_argument("--json", action="store_true", help="print the statistics as JSON")
    r.add_argument("--no-cache", action="store_true",
                   help="compile everything again, trusting no build in the cache (the "
                        "new builds replace them; the same as OFFLOW_NO_CACHE=1)")
    r.set_defaults(fn=_cmd_run)

    sd = sub.add_parser("serve-device", help="serve runs of a remote device on this machine: "
                        "`offlow run --remote NAME=ADDR:PORT` on the host reaches it "
                        "(docs/remote.md)")
    sd.add_argument("--listen", default="127.0.0.1:0", metavar="ADDR:PORT",
                    help="the address and port to listen on (default 127.0.0.1:0, a free "
                         "port, printed); never every interface unless --all-interfaces")
    sd.add_argument("--all-interfaces", action="store_true",
                    help="allow --listen 0.0.0.0:PORT or [::]:PORT")
    sd.add_argument("--work-dir", type=Folder(), default=remote.DEV_DIRS, metavar="DIR",
                    help="where each run's device executable is written and run, in a "
                         "folder of its own removed when the run ends (default /tmp; not "
                         "a file system mounted noexec). Folders left there by a "
                         "serve-device killed during a run are removed when one starts")
    secret_args(sd)
    sd.set_defaults(fn=_cmd_serve_device)

    ct = sub.add_parser("ctl", help="read and change the tables of a running program "
                        "(offlow run --serve prints its WINDOW)")
    ct.add_argument("window", type=Path, help="the program's window (/dev/shm/offlow-...)")
    csub = ct.add_subparsers(dest="ctl_cmd", required=True)
    csub.add_parser("tables", help="list the tables: kind, elements or routes, updates")
    tb = csub.add_parser("table", help="an array element: get INDEX, set INDEX VALUE, info "
                         "(a negative INDEX counts from the end: -1 the last)")
    tb.add_argument("name")
    tb.add_argument("op", choices=["get", "set", "info"])
    tb.add_argument("index", type=Whole(-U64_MAX, U64_MAX, "an element's index; negative: "
                                        "from the end"), nargs="?")
    tb.add_argument("value", nargs="?", help="an integer, a float or hex bytes, by the "
                    "element's type")
    mp = csub.add_parser("map", help="a hash map (SharedMap): get KEY, set KEY VALUE, delete "
                         "KEY, list [--limit N], info; KEY is FIELD=VALUE,... (every field: "
                         "an integer, an ipv4/ipv6 address, a mac), VALUE an integer, or for a "
                         "record value FIELD=VALUE,... as a key")
    mp.add_argument("name")
    mp.add_argument("op", choices=["get", "set", "delete", "list", "info"])
    mp.add_argument("key", nargs="?", help="src=10.0.0.1,dst=10.0.0.2,proto=6")
    mp.add_argument("value", nargs="?", help="an integer of the map's value type")
    mp.add_argument("--limit", type=Whole(0, U64_MAX), help="list: at most N keys")
    ro = csub.add_parser("route", help="add PREFIX NEXTHOP or del PREFIX, or add|del --file F "
                         "(IPv4 and IPv6, applied while packets flow)")
    ro.add_argument("op", choices=["add", "del"])
    ro.add_argument("prefix", nargs="?", help="10.0.0.0/8, 2001:db8::/32 (host bits zero)")
    ro.add_argument("hop", type=Whole(1, MAX_HOP), nargs="?", help="next hop 1..32767 (add)")
    ro.add_argument("--file", type=File(), help="many routes, a line each: PREFIX NEXTHOP "
                    "(del: PREFIX); the IPv6 ones in one batch (one rebuild: all or none)")
    ro.add_argument("--table", help="the route table (default: the one of the prefix's "
                    "family)")
    ct.set_defaults(fn=_cmd_ctl)

    what = ("replace the code of a running program's segments with a new build of a "
            "compatible program (same tables, queues, segments and elements), keeping its "
            "tables and every packet: each process whose code changed takes the new code "
            "between two batches (docs/reload.md)")
    rl = sub.add_parser("reload", help=what, description=what)
    rl.add_argument("window", type=Path, help="the program's window (offlow run --serve or "
                    "--duration prints it)")
    program_args(rl)
    rl.set_defaults(fn=_cmd_reload)

    ca = sub.add_parser("cache", help="the build cache: info, clear, prune [--max SIZE]")
    casub = ca.add_subparsers(dest="cache_cmd", required=True)
    casub.add_parser("info", help="its folder, entries, size and limit ($OFFLOW_CACHE_MAX)")
    casub.add_parser("clear", help="remove every entry not in use")
    cp = casub.add_parser("prune", help="remove the least recently used entries down to "
                                        "the limit")
    cp.add_argument("--max", metavar="SIZE", help="this limit instead of $OFFLOW_CACHE_MAX "
                                                  "(500M, 2G, 1.5GiB)")
    ca.set_defaults(fn=_cmd_cache)

    pl = sub.add_parser("plan", help="predict every placement of a program on a device "
                        "profile, ranked (docs/planner.md)")
    program_args(pl)
    pl.add_argument("--device", required=True, metavar="PROFILE",
                    help="the device the program's `nic` segments would run on: a preset "
                         "(offlow/planner/profiles: " + ", ".join(presets.names()) + ") or "
                         "a YAML file")
    pl.add_argument("--host", default="host", metavar="PROFILE",
                    help="the host's profile (default: this machine)")
    pl.add_argument("--workload", default="synthetic",
                    help="the calibration traffic: synthetic (the run's generator), kvs "
                         "(Floem's key-value requests) or a pcap file")
    pl.add_argument("--alt", action="append", default=[], metavar="'SET SET ...'",
                    help="rank these alternatives (each: --set lines separated by spaces) "
                         "instead of every placement")
    pl.add_argument("--work", action="append", default=[], metavar="ELEMENT=KIND",
                    help="an element's kind of work (integer, lookup, hash), when not "
                         "the default (lookup for elements that use a table, else integer)")
    pl.add_argument("--packets", type=Whole(1000), default=100_000,
                    help="packets of the calibration run")
    pl.add_argument("--top", type=Whole(1), default=12, help="placements shown")
    pl.add_argument("--repeats", type=Whole(1), default=None,
                    help=f"with --validate: rounds per placement (default "
                         f"{PlanRequest.repeats}), each a calibration run, (for "
                         "a placement with a queue between threads) a crossing probe, the "
                         "measured run and (for a placement using the device) a "
                         "calibration run slowed; the rounds' time is pooled")
    pl.add_argument("--validate", action="store_true",
                    help="also run each placement shown (the --alt ones, else the program "
                         "as written) with --profile DEVICE and print predicted beside "
                         "measured with the error of each")
    pl.set_defaults(fn=_cmd_plan)

    st = sub.add_parser("stats", help="print the counters of a running program (Prometheus "
                        "text format), read from its processes without pausing them")
    st.add_argument("window", type=Path, help="the run's window (/dev/shm/offlow-...; "
                    "offlow run prints it at start)")
    st.add_argument("--every", type=seconds(), metavar="S",
                    help="print them again every S seconds, until the run ends or Ctrl-C")
    st.set_defaults(fn=_cmd_stats)

    rt = sub.add_parser("router", help="router tools")
    rsub = rt.add_subparsers(dest="router_cmd", required=True)
    rc = rsub.add_parser("check", help="compare every LPM answer with an independent "
                                       "reference (IPv4 and IPv6)")
    router_check_args.add_arguments(rc)
    rc.set_defaults(fn=_cmd_router_check)

    pc = sub.add_parser("pcsa", help="distinct IPv4 sources counted on the NIC (PCSA), "
                                     "asked over a channel, beside the exact count and HLL")
    pc.add_argument("--input", type=File(), help="pcap to count (default: a generated one)")
    pc.add_argument("--distinct", type=Whole(1), default=None,
                    help="without --input: distinct sources of the generated stream "
                         f"(default {PCSA_DISTINCT:,}; at most --packets)")
    pc.add_argument("--packets", type=Whole(1), default=None,
                    help=f"without --input: packets of the generated stream (default "
                         f"{PCSA_PACKETS:,})")
    pc.set_defaults(fn=_cmd_pcsa)

    kv = sub.add_parser("kvs", help="key-value store tools (memcached protocol)")
    kvsub = kv.add_subparsers(dest="tool", required=True, parser_class=_SubParser)
    kvsub.add_parser("interop", help="replay the request sequences (binary, text and meta over "
                     "TCP, binary over UDP) against a real memcached and offlow's "
                     "server and show every difference (exit 1 on one)")
    kq = kvsub.add_parser("quick", help="offlow's CPU-only server beside memcached under the "
                          "same load")
    from offlow.kvs.args import add_quick_arguments

    add_quick_arguments(kq)
    kv.set_defaults(fn=_cmd_kvs)

    ls = sub.add_parser("lso", help="segmentation offload tools: large sends, cut on the NIC")
    from offlow.lso import cli as lso_cli

    lso_cli.add_arguments(ls.add_subparsers(dest="lso_cmd", required=True,
                                            parser_class=_SubParser), _SubParser)

    tu = sub.add_parser("tuples", help="tuple streams: generate, convert to a capture, send "
                                       "over UDP")
    from offlow.streams import cli as tuples_cli

    tuples_cli.add_arguments(tu.add_subparsers(dest="tuples_cmd", required=True,
                                               parser_class=_SubParser))

    ts = sub.add_parser("tsp", help="TSP by 2-opt hill climbing (NFComms' case study): "
                                    "climbers on nic, host or gpu, a manager on the host")
    from offlow.tsp import cli as tsp_cli

    tsp_cli.add_arguments(ts)

    b = sub.add_parser("bench", help="run a benchmark beside its peer and ceiling")
    import benchmarks  # the benchmarks (a package beside offlow's) say their options

    benchmarks.add_arguments(b)
    b.set_defaults(fn=benchmarks.run)
    return p


def _cmd_ctl(a: argparse.Namespace) -> int:
    from offlow.control import parse_value, read_route_file
    from offlow.session import attach

    with attach(a.window) as prog:
        tables = prog.tables
        if a.ctl_cmd == "tables":
            for name, t in tables.items():
                i = t.info()
                what = (f"elements of {i.size} bytes" if i.kind == "array" else
                        "keys" if i.kind == "map" else "routes")
                print(f"{name}: {i.kind}, {i.length} {what}, {i.updates} updates")
        elif a.ctl_cmd == "table":
            t = tables[a.name]
            if a.op == "info":
                print(t.info().text())
            elif a.index is None or (a.op == "set") != (a.value is not None):
                raise OfflowError("want `get INDEX` or `set INDEX VALUE`")
            elif a.op == "get":
                print(t[a.index])
            else:
                t[a.index] = parse_value(t.info(), a.value)
        elif a.ctl_cmd == "map":
            _map(tables[a.name], a)
        elif a.file is not None:
            if a.prefix is not None:
                raise OfflowError("want `route add|del --file F` or a PREFIX, not both")
            _route_file(tables, read_route_file(a.file, a.op), a.table)
        else:
            if a.prefix is None or (a.op == "add") != (a.hop is not None):
                raise OfflowError("want `route add PREFIX NEXTHOP` or `route del PREFIX`")
            t = tables.route_table(a.prefix, a.table)
            if a.op == "add":
                t.add(a.prefix, a.hop)
            else:
                t.delete(a.prefix)
    return 0


def _map(t: Table, a: argparse.Namespace) -> None:
    """offlow ctl WINDOW map NAME OP ...: one request (list: a walk), printed."""
    from offlow.mapctl import format_value

    wants = {"get": 1, "delete": 1, "set": 2, "list": 0, "info": 0}[a.op]
    if [a.key, a.value][:wants].count(None) or [a.key, a.value][wants:] != [None] * (2 - wants):
        raise OfflowError(f"want `map NAME {a.op}{' KEY' * (wants > 0)}{' VALUE' * (wants > 1)}`")
    if a.limit is not None and a.op != "list":
        raise OfflowError("--limit N goes with `list`")
    m = t.map()
    if a.op == "info":
        print(t.info().text())
    elif a.op == "get":
        v = m.get(a.key)
        if v is None:
            raise OfflowError(f"map `{t.name}` has no key {a.key}")
        print(format_value(m.layout, v))
    elif a.op == "set":
        m.set(a.key, a.value)
    elif a.op == "delete":
        m.delete(a.key)
    else:
        for key, value in m.items(a.limit):
            print(f"{key} {format_value(m.layout, value)}")


def _route_file(tables: Tables, changes: list[RouteChange], table: str | None) -> None:
    """A file's routes: each family's to its route table (or all to `table`)."""
    by_table: dict[str, tuple[Table, list[RouteChange]]] = {}
    for c in changes:
        t = tables.route_table(c.prefix, table)
        by_table.setdefault(t.name, (t, []))[1].append(c)
    for t, cs in by_table.values():
        n = t.apply(cs)
        print(f"{t.name}: {n} routes {'added' if cs[0].op == 'add' else 'deleted'}")


def _cmd_reload(a: argparse.Namespace) -> int:
    from offlow.dsl.loader import load_program
    from offlow.reload import reload

    done = reload(a.window, load_program(a.program, a.set),
                  lambda w: print(f"offlow: warning: {w}", file=sys.stderr))
    if done.reloaded:
        print(f"offlow: reloaded {', '.join(done.reloaded)} of `{done.program}`"
              + (f" ({', '.join(done.unchanged)}: code unchanged)" if done.unchanged else ""))
    else:
        print(f"offlow: the code of `{done.program}` is unchanged: nothing to reload")
    return 0


class _SubParser(argparse.ArgumentParser):
    """A subcommand's parser: its --help shows the options' defaults; a value its type
    refuses (offlow.argtypes) is the one error `offlow: error: OPTION VALUE: REASON`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(**kwargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """Arguments this command does not take are one error naming them and the
        command, with the closest option it does take (argparse's own left them to the
        top parser, which printed `offlow`'s whole usage and named no command)."""
        ns, extra = super().parse_known_args(args, namespace)
        if extra:
            raise OfflowError(self._not_taken(extra))
        return ns, extra

    def _not_taken(self, extra: list[str]) -> str:
        """What is wrong with arguments `extra`, which this command does not take."""
        options = [e.split("=", 1)[0] for e in extra if e.startswith("-") and e != "-"]
        if not options:
            return (f"{self.prog} takes no argument "
                    f"{' '.join(f'`{e}`' for e in extra)} there; "
                    f"`{self.prog} --help` says what it takes")
        known = {o.lstrip("-"): o for a in self._actions for o in a.option_strings}
        close = difflib.get_close_matches(options[0].lstrip("-"), list(known), n=1,
                                          cutoff=0.7)
        hint = f" (did you mean `{known[close[0]]}`?)" if close else ""
        return (f"{self.prog} has no option {', '.join(f'`{o}`' for o in options)}{hint}; "
                f"`{self.prog} --help` lists its options")

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as err:
            if isinstance(err.__context__, BadValue):
                raise OfflowError(refusal(action, arg_string, err.__context__)) from None
            raise


def main(argv: list[str] | None = None) -> int:
    # SIGTERM stops like Ctrl-C, which works even if inherited ignored
    with stop_signals() as stops:
        try:
            with signals_deferred():  # (a Ctrl-C while the parser is made: after it)
                p = parser()
            args = p.parse_args(argv)
            return int(args.fn(args))
        except OfflowError as err:
            print(f"offlow: error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            # Ctrl-C outside a run's wait (compiling, a benchmark's setup): no traceback.
            # A run's own Ctrl-C ends the run cleanly and is reported by its command.
            return _interrupted(isinstance(e, Terminated))
        except ImportError:
            # a command imports what it uses as it starts: a Ctrl-C then may come out of
            # a C extension's import as an ImportError (numpy's does)
            if stops.taken is None:
                raise
            return _interrupted(stops.taken == signal.SIGTERM)


def _interrupted(term: bool) -> int:
    """Say that the command was stopped (by SIGTERM or Ctrl-C); its exit status."""
    print("offlow: interrupted" + (" (SIGTERM)" if term else ""), file=sys.stderr)
    return 143 if term else 130


if __name__ == "__main__":
    sys.exit(main())
