"""Calibration: element timing in -DOFL_ELEMENT_TIME builds, the visits and queue
traffic per packet read against a capture counted by dpkt, and `offlow plan` end to
end on a user's program."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dpkt
import pytest

from offlow import cli
from offlow.build import compile_program
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.kvs.capture import kvs_requests
from offlow.paths import DATA
from offlow.planner.calibrate import calibrate
from offlow.runner import RunOptions, build_for, run

CAPTURE = DATA / "tls_ciphers.pcap"

# A user's program: their own element names, comments in the bodies, one element that
# works hard (a loop of ~20k dependent steps) and one that does almost nothing.
PROGRAM = '''
from offlow import Element, Port, Program, Sink, Source
from offlow.elements import ParseEth, Discard


class Churn(Element):
    """Deliberately slow: many dependent multiply-adds per packet."""
    fields = {"acc": "uint32_t"}
    body = """
        /* a long dependent chain the compiler cannot fold */
        uint32_t x = pkt->len;
        for (int i = 0; i < 20000; i++) x = (x ^ (x >> 7)) * 1664525u + pkt->data[i % 14];
        state->acc = x;   // kept, so the loop stays
    """


class Tap(Element):
    work = "hash"
    body = "/* nothing to do */"


def program():
    p = Program("user_churn")
    src, eth, churn, tap = Source("in0"), ParseEth("hdr"), Churn("churn"), Tap("tap")
    out, other = Sink("out0"), Discard("not_v4")
    src >> eth
    eth["ipv4"] >> churn >> tap >> out
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("front", [src, eth, other], device="nic", cores=[0])
    p.segment("back", [churn, tap, out], device="host", cores=[0])
    return p
'''


@pytest.fixture(scope="module")
def program_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plan") / "user_churn.py"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TLS capture's first 300 frames, interleaved with 100 IPv6 and 37 ARP frames
    (their share decides what reaches each element)."""
    with CAPTURE.open("rb") as f:
        v4 = [buf for _, buf in dpkt.pcap.Reader(f)][:300]
    mac = b"\x02" + bytes(5)
    v6 = bytes(dpkt.ethernet.Ethernet(src=mac, dst=mac, type=dpkt.ethernet.ETH_TYPE_IP6,
                                      data=bytes(dpkt.ip6.IP6(nxt=17, hlim=9, src=bytes(16),
                                                              dst=bytes(16), plen=0))))
    arp = bytes(dpkt.ethernet.Ethernet(src=mac, dst=mac, type=dpkt.ethernet.ETH_TYPE_ARP,
                                       data=bytes(28)))
    frames = list(v4)
    for k in range(100):
        frames.insert(3 * k + 1, v6)
    for k in range(37):
        frames.insert(11 * k + 5, arp)
    path = tmp_path_factory.mktemp("plan") / "mixed.pcap"
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for k, buf in enumerate(frames):
            w.writepkt(buf, ts=k * 1e-6)
    return path


def _ipv4_share(capture: Path) -> float:
    n = v4 = 0
    with capture.open("rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            n += 1
            v4 += dpkt.ethernet.Ethernet(buf).type == dpkt.ethernet.ETH_TYPE_IP
    return v4 / n


def test_calibration_counts_visits_and_crossings_like_the_capture(program_file, capture):
    cal = calibrate(program_file, [], capture, packets=2_000)
    share = _ipv4_share(capture)
    assert 0.5 < share < 0.8
    el = {e.name: e for e in cal.elements}
    assert el["hdr"].visits == pytest.approx(1.0)
    assert el["churn"].visits == pytest.approx(share, abs=1e-9)
    assert el["tap"].visits == pytest.approx(share, abs=1e-9)
    (q,) = cal.queues
    assert (q.src, q.dst) == ("front", "back")
    assert q.packets == pytest.approx(share, abs=1e-9)
    assert q.bytes > q.packets * 14  # each entry carries its frame (an Ethernet header at least)
    assert el["churn"].segment == "back" and el["churn"].kind == "integer"
    assert el["tap"].kind == "hash"  # its class says so


def test_the_time_lands_on_the_element_that_spends_it(program_file):
    cal = calibrate(program_file, [], CAPTURE, packets=2_000)
    el = {e.name: e for e in cal.elements}
    # ~20k dependent steps against an empty body: a thousandfold gap by construction;
    # the check only needs the order and a wide margin.
    assert el["churn"].ns > 10 * max(el["tap"].ns, el["hdr"].ns, 1.0)


def test_only_timed_builds_report_element_time(program_file):
    prog = load_program(program_file)
    opts = RunOptions(input=CAPTURE)
    plain = build_for(prog, opts, werror=True)
    timed = build_for(prog, opts, werror=True, own_sets=("element_time",))
    assert "OFL_ETIME_END(ctx->el_ticks[" in plain.sources["host.c"]
    for b, expect in ((plain, False), (timed, True)):
        res = run(b, opts)
        assert res.ok, res.errors
        cores = [c for d in res.stats.values() for c in d["cores"]]
        has_ns = {el: "ns" in v for c in cores for el, v in c["elements"].items()}
        assert has_ns and all(v == expect for v in has_ns.values()), has_ns
        assert all(("timer_ns" in c) == expect for c in cores)


def _offlow(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OFFLOW_DATA=str(DATA))
    return subprocess.run([sys.executable, "-m", "offlow.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env)


def test_offlow_plan_ranks_alternatives_with_their_set_lines(program_file):
    r = _offlow("plan", str(program_file), "--device", "liquidio-cn23xx", "--workload",
                str(CAPTURE), "--packets", "2000", "--alt", "", "--alt", "back.device=nic",
                "--alt", "front.device=host")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "ranked alternatives given (3; the best 3 shown)" in out
    rows = [ln for ln in out.splitlines() if ln.strip()[:1].isdigit() and "core" in ln]
    assert len(rows) == 3
    # The hard-working element on a LiquidIO core (0.22 of a host core) is the slowest
    # stage wherever it goes to the NIC; on the host it is not: the host design wins.
    assert "back:host" in rows[0]
    assert rows[-1].split()[4:6] == ["nic", "core"] and "back:nic" in rows[-1]
    assert "--set back.device=nic" in rows[-1]
    assert "(as written)" in out


def test_offlow_plan_validate_measures_each_alternative(program_file):
    r = _offlow("plan", str(program_file), "--device", "cmp-nic-200", "--workload",
                str(CAPTURE), "--packets", "2000", "--validate", "--repeats", "2",
                "--alt", "", "--alt", "front.device=host")
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("validation: each placement run with --profile cmp-nic-200")[1]
    rows = [ln.split() for ln in table.splitlines() if ln.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["1", "2"]
    for row in rows:
        predicted, measured = float(row[1]), float(row[2])
        assert predicted > 0 and measured > 0
        # the error printed beside them lies within what the rounded figures allow
        # (each is printed to its last digit: the true one is within half of it)
        half_p, half_m = (0.5 * 10.0 ** -len(x.partition(".")[2]) for x in row[1:3])
        low = ((predicted - half_p) / (measured + half_m) - 1) * 100
        high = ((predicted + half_p) / (measured - half_m) - 1) * 100
        assert low - 0.5 <= float(row[3].rstrip("%")) <= high + 0.5, row
        # the rounds pooled: the row's error (measured time over predicted, each the
        # rounds' mean, less 1) is a mean of the rounds' own, weighted by their predicted
        # time, so it lies within their range
        least, most = (float(x.rstrip("%")) for x in row[4].split(".."))
        assert least <= float(row[3].rstrip("%")) <= most, row
    assert "worst error" in table
    assert ("2 rounds (a calibration, the crossings probed, the run, a calibration slowed) "
            "pooled") in table
    # the placement as written crosses from the NIC to the host: its crossing is probed
    # in each of its rounds (one point each); with front on the host both segments run
    # on host core 0, nothing crosses threads, nothing is probed
    written = next(row[0] for row in rows if "(as written)" in " ".join(row))
    probed = [ln for ln in table.splitlines() if "its crossings probed in each round" in ln]
    assert [ln.split()[1].rstrip(":") for ln in probed] == [written]
    assert len(probed[0].split("per entry, loop+copies): ")[1].split(", ")) == 2, probed
    # a minutes-long command says each step as it starts it (stderr)
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("offlow plan: ")]
    assert steps[0].startswith("offlow plan: calibrating `")
    rounds = [ln.partition("validating ")[2] for ln in steps[1:]]
    assert len(rounds) == 4 and rounds[-1].endswith(": round 2 of 2"), steps
    assert rounds[0].startswith("placement 1 of 2 (") and "placement 2 of 2 (" in rounds[2]


def test_an_element_with_an_unknown_kind_of_work_is_refused(tmp_path):
    path = tmp_path / "bad_work.py"
    path.write_text(PROGRAM.replace('work = "hash"', 'work = "crypto"'))
    with pytest.raises(OfflowError, match=r"element `tap` \(Tap\): work = 'crypto'; give one "
                       "of integer, lookup, hash"):
        compile_program(load_program(path))


@pytest.mark.parametrize("args,message", [
    (["--device", "liquidio-cn99"], "no device profile `liquidio-cn99`"),
    (["--device", "host", "--work", "churn=crypto"], "--work churn=crypto: give ELEMENT=KIND"),
    (["--device", "host", "--work", "nosuch=hash"], "has no element `nosuch`"),
    (["--device", "host", "--workload", "/nonexistent.pcap"], "no such capture"),
    (["--device", "host", "--workload", "{garbage}"], "not a readable pcap file"),
    (["--device", "host", "--packets", "0"], "--packets 0: must be a whole number 1000.."),
    (["--device", "host", "--validate", "--repeats", "0"], "--repeats 0"),
])
def test_offlow_plan_refuses_bad_options_before_running(program_file, args, message, tmp_path,
                                                        capsys):
    """(The CLI's main in this process: a refusal runs nothing, so a Python of its own
    per case only cost a start; an exception that escaped main would fail the test.)"""
    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"not a capture at all, just text\n" * 4)
    args = [a.replace("{garbage}", str(garbage)) for a in args]
    rc = cli.main(["plan", str(program_file), *args])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_the_kvs_workload_is_floems(tmp_path):
    path = tmp_path / "kvs.pcap"
    kvs_requests(path, count=5_000, keys=1_000)
    reqs = []
    with path.open("rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            udp = dpkt.ethernet.Ethernet(buf).data.data
            assert udp.dport == 11211
            reqs.append(bytes(udp.data)[8:])  # after memcached's frame header
    sets = [r for r in reqs if r.startswith(b"set ")]
    warm = len(reqs) - 5_000
    assert all(r.startswith(b"set ") for r in reqs[:warm])  # each key stored first
    mix = reqs[warm:]
    gets = [r for r in mix if r.startswith(b"get ")]
    assert 0.88 < len(gets) / len(mix) < 0.92
    assert {len(r.split()[1]) for r in reqs} == {32}
    assert {len(r.split(b"\r\n")[1]) for r in sets} == {64}
    keys = [r.split()[1] for r in gets]
    top = max(set(keys), key=keys.count)
    assert keys.count(top) / len(keys) > 0.05  # Zipf 0.9 over 1,000 keys: ~13% the hottest


def test_the_validations_measured_run_reads_the_calibrations_packets(program_file,
                                                                    monkeypatch):
    # Both replay the capture as often as `packets` needs (until the evening of
    # 2026-11-27 the measured run replayed it packets // 1000 times: the kvs workload's
    # 11,956 frames 100 times, ten times the calibration's packets)
    from offlow.planner import validate
    frames = sum(1 for _ in dpkt.pcap.Reader(CAPTURE.open("rb")))
    packets = 3 * frames + 1  # four replays
    cal = calibrate(program_file, [], CAPTURE, packets, crossing_repeats=0, runs=1)
    assert cal.packets == 4 * frames
    results = []

    def run_and_keep(b, opts):
        results.append(run(b, opts))
        return results[-1]

    monkeypatch.setattr(validate, "run", run_and_keep)
    mpps, _ = validate.measure(program_file, [], CAPTURE, packets, "cmp-nic-200")
    assert mpps > 0 and len(results) == 1
    read = sum(v["in"] for d in results[0].stats.values() for c in d.get("cores", [])
               for name, v in c.get("elements", {}).items() if name == "in0")
    assert read == cal.packets
