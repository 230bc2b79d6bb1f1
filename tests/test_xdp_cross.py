"""The crossing from XDP up to host segments (offlow/codegen/xsk.py, runtime/tools/
xdp_cross.c, xdp_xsk.c): frames redirected to an AF_XDP socket with the live fields in
XDP metadata in front of them, pushed by the xdp process into the queue's ring, taken
by the host segment as from the NIC. Each checked against the NIC's run of the same
program and input, and against dpkt's reading of the input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import cbuild, live
from offlow.build import build, plan_program
from offlow.codegen import xsk
from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.explain import explain
from offlow.runner import progress_totals
from offlow.targets import xdp
from tests.e2e import EXAMPLE, QUIC, ROOT, TLS, read_frames, run_example, window_in
from tests.netns import veth_in_namespace

SPLIT = ROOT / "tests" / "programs" / "xdp_split.py"
WHY_NOT = xdp.TARGET.unusable()
needs_bpf = pytest.mark.skipif(WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}")
FRAME_MAX = xsk.XSK_FRAME - 256  # the kernel's XDP_PACKET_HEADROOM in front of each frame


def _run(tmp_path: Path, program: Path, setting: str, capture: Path | None,
         **opts: Any) -> tuple[dict[str, Any], list[tuple[float, bytes]]]:
    out = tmp_path / f"{setting.replace('=', '-')}.pcap"
    s = run_example([setting] if setting else [], program, input=capture, output=out, **opts)
    assert s["ok"], s["errors"]
    assert s["accounting"]["unaccounted"] == 0, s["accounting"]
    with open(out, "rb") as f:
        return s, [(ts, bytes(b)) for ts, b in dpkt.pcap.Reader(f)]


def test_explain_shows_the_crossing_in_xdp_metadata() -> None:
    text = explain(plan_program(load_program(SPLIT, ["edge.device=xdp"])))
    assert ("carries cookie:uint64_t, tag3:uint8_t[3]: 11 B of the 32 B state + timestamp "
            "(8 B) + packet bytes (up to 2048)") in text
    assert ("from XDP: the fields in XDP metadata, 16 B in front of the frame (11 B of "
            "fields, 1 B pad, 4 B tail), through an AF_XDP socket (copy mode)") in text
    nic = explain(plan_program(load_program(SPLIT)))
    assert "from XDP" not in nic and "carries cookie:uint64_t, tag3:uint8_t[3]: 11 B" in nic


@needs_bpf
@pytest.mark.parametrize("capture", ["quic", "synthetic"])
def test_ttl_pipeline_with_rx_on_xdp_writes_what_the_nic_writes(capture: str,
                                                                tmp_path: Path) -> None:
    """examples/ttl_pipeline.py, its first segment in XDP and the rest on the host: the
    same frames, timestamps and counters as with it on the emulated NIC."""
    path = {"quic": QUIC, "synthetic": None}[capture]
    synth = ({"count": 2000, "seed": 26, "sizes": "60:3,333:1,1514:1,3001:1"}
             if path is None else {})
    nic, nic_out = _run(tmp_path, EXAMPLE, "", path, **synth)
    got, xdp_out = _run(tmp_path, EXAMPLE, "rx.device=xdp", path, **synth)
    assert [s["device"] for s in got["segments"]] == ["xdp", "host"]
    assert len(xdp_out) == got["accounting"]["forwarded"] > 100
    assert xdp_out == nic_out
    assert got["elements"] == nic["elements"] and got["accounting"] == nic["accounting"]
    assert got["queues"][0]["packets"] == got["queues"][0]["delivered"] == len(xdp_out)


@needs_bpf
def test_frames_longer_than_an_afxdp_frame_are_counted_drops(tmp_path: Path) -> None:
    """The TLS capture has frames of up to 4,519 bytes: those longer than an AF_XDP
    frame takes are dropped at the queue and counted (too_long); the others leave as
    on the NIC."""
    long = sum(1 for f in read_frames(TLS) if len(f) > FRAME_MAX)
    nic, nic_out = _run(tmp_path, EXAMPLE, "", TLS)
    got, xdp_out = _run(tmp_path, EXAMPLE, "rx.device=xdp", TLS)
    assert long > 0
    assert got["accounting"]["dropped"] == [{
        "at": "rx->app", "reason": "too_long", "packets": long,
        "what": f"longer than an AF_XDP frame takes ({FRAME_MAX} B)"}]
    assert xdp_out == [(ts, f) for ts, f in nic_out if len(f) <= FRAME_MAX]


@needs_bpf
def test_a_channel_that_carries_no_field_crosses_too(tmp_path: Path) -> None:
    """tests/programs/xdp_ttl_split.py: xdp_ttl's path split after the TTL, so its
    IPv6 channel to the sink carries no field (its metadata is the tail alone): the
    same frames and counters as the whole program on the NIC."""
    capture = tmp_path / "mixed.pcap"
    with open(capture, "wb") as f:  # IPv4 and IPv6 UDP of odd sizes, written with dpkt
        w = dpkt.pcap.Writer(f)
        for k in range(300):
            eth = dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6)
            udp = dpkt.udp.UDP(sport=5, dport=7, data=b"q" * (k * 7 % 901))
            udp.ulen = 8 + len(udp.data)
            if k % 3:
                eth.type, eth.data = dpkt.ethernet.ETH_TYPE_IP, dpkt.ip.IP(
                    src=bytes([192, 0, 2, 1]), dst=bytes([198, 51, 100, k % 250]), ttl=9,
                    p=17, data=udp, len=20 + udp.ulen)
            else:
                eth.type, eth.data = dpkt.ethernet.ETH_TYPE_IP6, dpkt.ip6.IP6(
                    src=b"\x20" * 16, dst=b"\x26" * 16, hlim=9, nxt=17, data=udp,
                    plen=udp.ulen)
            w.writepkt(bytes(eth), ts=1700000000 + k / 1000)
    ttl = ROOT / "tests" / "programs" / "xdp_ttl.py"
    nic, nic_out = _run(tmp_path, ttl, "", capture)
    got, xdp_out = _run(tmp_path, ROOT / "tests" / "programs" / "xdp_ttl_split.py",
                        "edge.device=xdp", capture)
    assert [len(lay["fields"]) for lay in got["queues"][0]["channels"]] == [1, 0]
    assert got["elements"]["hop6"]["in"] == 100 and got["elements"]["hop4"]["in"] == 200
    assert xdp_out == nic_out and got["elements"] == nic["elements"]


def _expected_split(capture: Path) -> list[bytes]:
    """What xdp_split.py writes for each IPv4 frame, computed from dpkt's reading: the
    TTL and id, and the low 3 bytes of len * 2654435761, in the source address."""
    out = []
    for f in read_frames(capture):
        eth = dpkt.ethernet.Ethernet(f)
        if not isinstance(eth.data, dpkt.ip.IP) or len(f) > FRAME_MAX:
            continue
        ip = eth.data
        cookie = (len(f) * 2654435761) & 0xFFFFFF
        out.append(f[:6] + bytes([ip.ttl, ip.id >> 8, ip.id & 0xFF]) +
                   cookie.to_bytes(3, "big") + f[12:])
    return out


@needs_bpf
def test_fields_set_in_xdp_arrive_intact_on_the_host(tmp_path: Path) -> None:
    """tests/programs/xdp_split.py: a 3-byte field and a 64-bit one set in XDP, read by
    the host segment, which writes them into each frame: as dpkt computes them from
    the input, and as the NIC's run writes them."""
    expected = _expected_split(QUIC)
    nic, nic_out = _run(tmp_path, SPLIT, "", QUIC)
    got, xdp_out = _run(tmp_path, SPLIT, "edge.device=xdp", QUIC)
    assert len(expected) > 100
    assert [f for _, f in xdp_out] == expected
    assert xdp_out == nic_out and got["elements"] == nic["elements"]


def test_what_still_cannot_cross_is_refused_with_what_to_do() -> None:
    """Packets cross up from XDP, not down into it; and at most 248 bytes of fields fit
    the kernel's XDP metadata."""
    with pytest.raises(OfflowError) as err:
        plan_program(load_program(EXAMPLE, ["app.device=xdp", "rx.device=host"]))
    assert str(err.value) == (
        "segment `app` cannot run on target `xdp`: its packets come from segment `rx` (queue "
        "`rx->app`): packets cross from XDP up to other devices (AF_XDP) but not down into "
        "XDP; start the path on xdp (its source in this segment), or place this segment on "
        "another device")
    from offlow import Element, Port, Program, Sink, Source

    class Big(Element):
        inputs = (Port("inp", "eth"),)
        outputs = (Port("out", "eth"),)
        fields = {"blob": "uint8_t[250]"}
        body = "state->blob[0] = 1;"

    class Use(Element):
        inputs = (Port("inp", "eth"),)
        outputs = (Port("out", "eth"),)
        body = "pkt->data[0] = state->blob[249];"

    p = Program("big")
    src, big, use, out = Source("rx"), Big("big"), Use("use"), Sink("tx")
    src >> big >> use >> out
    p.segment("edge", [src, big], device="xdp")
    p.segment("rest", [use, out], device="host")
    with pytest.raises(OfflowError) as err:
        plan_program(p)
    assert str(err.value) == (
        "segment `edge` cannot run on target `xdp`: queue `edge->rest` channel 0 (big.out -> "
        "use.inp) carries 250 bytes of state; in XDP metadata at most 248 cross (the kernel's "
        "limit): fewer fields live across the queue")


def test_xdp_ring_errors_come_before_any_process_starts() -> None:
    split = plan_program(load_program(SPLIT, ["edge.device=xdp"]))
    assert xdp.run_options(split, None, "generic", None, 64) == ["--opt", "xdp.ring=64"]
    with pytest.raises(OfflowError) as err:
        xdp.run_options(split, None, "generic", None, 100)
    assert str(err.value) == ("--xdp-ring 100: expected a power of 2 up to 16384 (twice as "
                              "many 4 KiB frames of memory)")
    whole = plan_program(load_program(ROOT / "tests" / "programs" / "xdp_ttl.py",
                                      ["edge.device=xdp"]))
    with pytest.raises(OfflowError) as err:
        xdp.run_options(whole, None, "generic", None, 64)
    assert str(err.value) == (
        "--xdp-ring 64: no segment on xdp sends packets to another device (the ring is the "
        "AF_XDP socket's of that crossing)")


# Calls the generated host side's ofl_xdp_up on frames whose metadata is not a
# crossing's: each must be refused (-EBADMSG) before anything is pushed.
BAD_META = r"""
#define main ofl_generated_main
#include "xdp.c"
#undef main
#include <stdio.h>

static int up(const uint8_t *meta, unsigned mlen, unsigned len, unsigned room) {
    static uint8_t frame[4096];
    uint8_t *data = frame + 256;
    memset(frame, 0, sizeof frame);
    memcpy(data - mlen, meta, mlen);
    struct ofl_pkt p = { .data = data, .len = len, .cap = len };
    return ofl_xdp_up(&p, data, room);
}

int main(void) {
    struct ofl_meta_0 good;
    memset(&good, 0, sizeof good);
    good.tail.len = 60; good.tail.code = 0; good.tail.magic = OFL_META_MAGIC;
    struct ofl_meta_0 m = good;
    int bad = 0;
    bad |= up((const uint8_t *)&good, sizeof good, 60, 3) != -EBADMSG;     /* no room: tail */
    bad |= up((const uint8_t *)&good, sizeof good, 60, sizeof good - 1) != -EBADMSG;
    m.tail.magic = 0; bad |= up((const uint8_t *)&m, sizeof m, 60, 256) != -EBADMSG;
    m = good; bad |= up((const uint8_t *)&m, sizeof m, 61, 256) != -EBADMSG;  /* length */
    m = good; m.tail.code = 7; bad |= up((const uint8_t *)&m, sizeof m, 60, 256) != -EBADMSG;
    bad |= up((const uint8_t *)"", 0, 60, 256) != -EBADMSG;                /* none at all */
    m = good; m.tail.len = OFL_MTU + 1;                      /* longer than an entry takes */
    bad |= up((const uint8_t *)&m, sizeof m, OFL_MTU + 1, 256) != -EBADMSG;
    printf("%s\n", bad ? "accepted" : "refused");
    return bad;
}
"""


@needs_bpf
def test_a_frame_without_room_for_its_metadata_is_refused_not_read(tmp_path: Path) -> None:
    """The host side's reading of the metadata: a frame with less room in front than
    its metadata, no tail, a tail of another length, code or magic, a frame longer than
    the mtu (than a ring entry holds): refused (the run counts it, bad_meta), never read
    past its umem frame."""
    b = build(load_program(SPLIT, ["edge.device=xdp"]))
    test = tmp_path / "bad_meta.c"
    test.write_text(BAD_META)
    exe = cbuild.build_exe("xdp-bad-meta", [test, *xdp.HOST_SOURCES], libs=xdp.HOST_LIBS,
                           includes=[xdp.TOOLS, b.directory],
                           own_sets=("libnl", "part_of_generated"),
                           link=cbuild.description().flags("xdp_link"))
    res = subprocess.run([str(exe)], capture_output=True, text=True)
    assert (res.returncode, res.stdout.strip()) == (0, "refused"), res.stderr


# libFuzzer over the generated reader of the metadata (xdp_split.py's host side):
# input = room (2 bytes), frame length (2 bytes, xor 0x5A5A), then the umem frame's bytes; the
# frame at `room` in a 4096-byte umem frame; what it accepts goes into a real ring
# (enqueue=drop: nobody consumes it here).
FUZZ_META = r"""
#include "xdp_run.h"
#define ofl_xdp_main(d, argc, argv) ((void)(d), (void)(argc), (void)(argv), 0)
#define main ofl_generated_main
#include "xdp.c"
#undef main

static struct ofl_qout q;

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    const struct ofl_ring_spec *r = &ofl_ring_desc[0];
    size_t len = ofl_ring_mem_size(r->size, r->entry_size);
    void *mem = aligned_alloc(64, (len + 63) / 64 * 64);
    static struct ofl_ce ce;
    static struct ofl_waiter w;
    if (!mem || ofl_ring_format(mem, len, r->size, r->entry_size, r->batch, r->data_off) < 0 ||
        ofl_ce_start(&ce, OFL_CE_INLINE, -1) < 0)
        abort();
    ofl_waiter_init(&w, NULL, 0, NULL);
    if (ofl_qout_init(&q, mem, len, &ce, &w) < 0) abort();
    q.drop_full = true;
    ofl_xdp_ctx.out_edge__slow = &q;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    static uint8_t frame[4096];
    setup();
    if (n < 4) return 0;
    uint32_t room = (uint32_t)(d[0] | d[1] << 8) % 4096u;
    uint32_t len = (uint32_t)(d[2] | d[3] << 8) ^ 0x5A5Au;  /* (not the tail's bytes) */
    if (len > 4096u - room) return 0;
    memset(frame, 0, sizeof frame);
    memcpy(frame, d + 4, n - 4 < sizeof frame ? n - 4 : sizeof frame);
    struct ofl_pkt p = { .data = frame + room, .len = len, .cap = len };
    /* what it takes must fit a ring entry (ASan sees no overflow inside the staging
     * buffer, which holds a batch of entries) */
    if (ofl_xdp_up(&p, frame + room, room) == 0 && p.len > OFL_MTU) abort();
    ofl_qout_flush(&q);
    return 0;
}
"""


def test_fuzz_the_metadata_reader(tmp_path: Path) -> None:
    """The host side's reader of XDP metadata, generated for xdp_split.py, under
    libFuzzer with ASan+UBSan from valid frames' seeds: no crash, no read outside the
    umem frame, nothing taken that is longer than a ring entry holds (a mutation that
    drops the mtu check is not found in 10 s here: the C test above pins that case)."""
    from offlow.build import generate
    from tests.test_fuzz import SECONDS, SETS, _libfuzzer_problem

    problem = _libfuzzer_problem(tmp_path)
    if problem:
        pytest.skip(problem)
    for name, text in generate(plan_program(load_program(SPLIT, ["edge.device=xdp"]))).items():
        (tmp_path / name).write_text(text)
    (tmp_path / "fuzz_meta.c").write_text(FUZZ_META)
    exe = cbuild.build_exe("fuzz_xdp_meta", [tmp_path / "fuzz_meta.c"], ["core"], SETS,
                           includes=[xdp.TOOLS, tmp_path], own_sets=("libnl",))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in (60, 2048):  # valid frames: a short one, one of the mtu
        meta = bytes(8) + b"abc" + b"\0" + n.to_bytes(2, "little") + bytes([0, xsk.MAGIC])
        umem = bytes(256 - len(meta)) + meta + bytes(k % 251 for k in range(n))
        (corpus / f"good{n}").write_bytes((256).to_bytes(2, "little")
                                          + (n ^ 0x5A5A).to_bytes(2, "little") + umem)
    res = subprocess.run([str(exe), "-runs=5000000", f"-max_total_time={SECONDS}", "-seed=1",
                          f"-artifact_prefix={tmp_path}/", str(corpus)],
                         capture_output=True, text=True, timeout=SECONDS + 60,
                         env=dict(os.environ, UBSAN_OPTIONS="halt_on_error=1"))
    assert res.returncode == 0 and "Done " in res.stderr, res.stderr[-4000:]
    assert "crash-" not in res.stderr


SEND = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((sys.argv[1], 0))
for h in sys.argv[2:]:
    s.send(bytes.fromhex(h))
"""


def _forwarded(window: Path, run: subprocess.Popen[str], n: int) -> bool:
    """Wait until the run's live counters show `n` packets taken by its sinks; False
    when the run ends first."""
    while run.poll() is None:
        try:
            if progress_totals(live.read(window))["forwarded"] >= n:
                return True
        except OfflowError:  # (the run is ending)
            return False
        time.sleep(0.05)
    return False


def _xdp_child(pid: int) -> int | None:
    """The xdp process among `pid`'s descendants (its command line has --obj)."""
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = child.read_text().split()
        except FileNotFoundError:  # the thread ended after the glob found it
            continue
        for c in kids:
            try:
                if b"--obj" in Path(f"/proc/{c}/cmdline").read_bytes():
                    return int(c)
            except (FileNotFoundError, ProcessLookupError):  # (it ended: a build step's)
                continue
            deeper = _xdp_child(int(c))
            if deeper:
                return deeper
    return None


@needs_bpf
def test_a_full_afxdp_ring_is_a_counted_drop_not_a_hang(tmp_path: Path) -> None:
    """--iface on a veth pair the test makes, an AF_XDP ring of 4 entries: the xdp
    process is stopped (SIGSTOP) while 40 frames go through XDP; the kernel puts 4 in
    the ring and drops the rest, which the run counts (afxdp_full); the 4 reach the
    host's sink once the process goes on (its live counters show them there; the run
    is then stopped, as by Ctrl-C, rather than left to its 15 s); every frame is
    accounted for."""
    ns = f"ofl-t26x-{os.getpid()}"
    out = tmp_path / "out.pcap"
    with veth_in_namespace(ns) as sh:
        sent = [f for f in read_frames(QUIC) if f[12:14] == b"\x08\x00"][:40]
        run = subprocess.Popen([*sh, str(ROOT / ".venv" / "bin" / "offlow"), "run",
                                str(EXAMPLE), "--set", "rx.device=xdp", "--iface", "ofl-a",
                                "--xdp-ring", "4", "--duration", "15", "--json",
                                "--output", str(out), "--window-file",
                                str(tmp_path / "window.json")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert run.stderr is not None
            window = Path(window_in(run, tmp_path / "window.json"))
            child = None
            for _ in range(400):  # until the program is attached to ofl-a
                link = subprocess.run(["ip", "-n", ns, "link", "show", "ofl-a"],
                                      capture_output=True, text=True).stdout
                child = _xdp_child(run.pid)
                if ("xdp" in link and child) or run.poll() is not None:
                    break
                time.sleep(0.05)
            assert run.poll() is None and child, run.communicate()
            time.sleep(0.3)  # (its socket is in the map before the program is attached)
            os.kill(child, signal.SIGSTOP)
            try:
                subprocess.run([*sh, sys.executable, "-c", SEND, "ofl-b",
                                *(f.hex() for f in sent)], check=True, timeout=30)
            finally:
                os.kill(child, signal.SIGCONT)
            if _forwarded(window, run, 4):
                run.send_signal(signal.SIGINT)
            stdout, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
        assert run.returncode == 0, err
        s = json.loads(stdout)
    acc = s["accounting"]
    assert acc["read"] == len(sent) and acc["unaccounted"] == 0, (acc, err)
    assert acc["dropped"] == [{"at": "rx->app", "reason": "afxdp_full",
                               "packets": len(sent) - 4, "what": xsk.DROPS["afxdp_full"]}], (
        acc, err)
    assert acc["forwarded"] == 4 and len(read_frames(out)) == 4, (acc, err)
