"""The control plane (offlow/control.py, `offlow ctl`): the tables of a running program
read and changed from outside while packets flow.

The router forwards synthetic IPv4 traffic (and a replayed IPv6 capture) while a
client adds and deletes thousands of IPv4 (IPv6) routes; every forwarded packet's
next hop (its rewritten MAC) is checked, with dpkt, against a reference that replays
the update log: each packet must match the table as it stood after some number of
updates c, or after c + 1 (the update it raced with: an update of a short IPv4 prefix
rewrites its /16s one after the other, so during it two addresses may see it done and
not yet; an IPv6 update is one swap), and since one core forwards in order, c never
goes back. Errors (a table that does not exist, a malformed prefix, a value of the
wrong size, a route the table lacks) get one clear error and leave
the program running."""

from __future__ import annotations

import ipaddress
import random
import re
import struct
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dpkt
import pytest

from offlow import Handler, Program, Shared, Sink, Source
from offlow.build import plan_program
from offlow.channels import SIDE_B, Region
from offlow.control import ControlError, Info, RouteChange, Table
from offlow.dsl.loader import load_program
from offlow.elements import Count
from offlow.errors import OfflowError
from offlow.ir.graph import CHANNEL_NAME_MAX, CTL_CHANNEL_PREFIX
from offlow.runner import RunOptions, progress_totals
from offlow.session import Session, session
from tests.e2e import offlow_cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ROUTER = EXAMPLES / "router.py"
TTL = EXAMPLES / "ttl_pipeline.py"


Net = ipaddress.IPv4Network | ipaddress.IPv6Network
Update = tuple[str, Net, int]


def _hop_rule(net: Net, nports: int = 16) -> int:
    """The next hop of a prefix loaded from a file (runtime/lib/lpm routes.h)."""
    h = 2166136261
    for b in net.network_address.packed + bytes([net.prefixlen]):
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h % nports + 1


class Reference:
    """The route table as the update log leaves it after each update."""

    def __init__(self, routes: dict[tuple[int, int], int], bits: int = 32) -> None:
        self.routes = dict(routes)
        self.bits = bits
        # answers of the table as it stands now, by address: a replay asks about the
        # same few addresses again and again between two updates
        self._answers: dict[int, int] = {}

    def apply(self, op: Update | list[Update]) -> None:
        """One update, or a batch of them (applied together)."""
        self._answers.clear()
        for kind, net, hop in op if isinstance(op, list) else [op]:
            key = (int(net.network_address), net.prefixlen)
            if kind == "add":
                self.routes[key] = hop
            else:
                del self.routes[key]

    def lookup(self, addr: int) -> int:
        """The next hop of the longest prefix holding `addr` (0: none)."""
        hop = self._answers.get(addr)
        if hop is None:
            hop = self._answers[addr] = self._longest_match(addr)
        return hop

    def _longest_match(self, addr: int) -> int:
        full = (1 << self.bits) - 1
        for length in range(self.bits, -1, -1):
            mask = (full << (self.bits - length)) & full
            hop = self.routes.get((addr & mask, length))
            if hop:
                return hop
        return 0


def _updates(n: int, seed: int) -> list[Update]:
    """n adds and deletes inside 10.0.0.0/8 (lengths 9..32), a delete only of a route
    the log added and has not deleted."""
    rng = random.Random(seed)
    held: list[Net] = []
    out: list[Update] = []
    for _ in range(n):
        if held and rng.random() < 0.35:
            net = held.pop(rng.randrange(len(held)))
            out.append(("del", net, 0))
            continue
        length = rng.choice([9, 12, 16, 20, 24, 24, 25, 28, 32, rng.randint(9, 32)])
        addr = (10 << 24 | rng.getrandbits(24)) & ((0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF)
        net = ipaddress.IPv4Network((addr, length))
        if net in held:
            continue
        held.append(net)
        out.append(("add", net, rng.randint(1, 0x7FFF)))
    return out


def apply_log(routes: Table, log: list[Update]) -> Info:
    """Apply the update log to route table `routes` one update at a time; its info
    after the last."""
    for i, (kind, net, hop) in enumerate(log):
        if i % 100 == 99:
            # a breath every 100 updates, so that packets go out between them even
            # when this machine's CPUs are busy (the replay check wants many states)
            time.sleep(0.005)
        if kind == "add":
            routes.add(str(net), hop)
        else:
            routes.delete(str(net))
    return routes.info()


def wait_forwarding(s: Session) -> None:
    """Wait until session `s` has forwarded a packet: on a loaded machine its processes
    may take longer to start forwarding than an update log takes to apply, and the
    replay check wants packets forwarded along the updates."""
    deadline = time.monotonic() + 60
    while progress_totals(s.stats(tables=False)[0])["forwarded"] == 0:
        assert time.monotonic() < deadline, "no packet forwarded within 60 s"
        time.sleep(0.005)


def _route_while_forwarding(opts: RunOptions, table: str, log: list[Update]) -> Info:
    """Run the router with `opts`, apply the update log to `table` while it forwards,
    and return the table's info after the last update."""
    with session(load_program(ROUTER), opts) as s:
        wait_forwarding(s)
        info = apply_log(s.tables[table], log)
        s.wait_drained(timeout=120)
    assert s.result is not None and s.result.ok, s.result
    return info


def test_router_forwards_while_routes_change(tmp_path: Path) -> None:
    prefixes = tmp_path / "routes.txt"
    prefixes.write_text("# the table at start\n10.0.0.0/8\n")
    out = tmp_path / "out.pcap"
    log = _updates(3000, seed=5)
    opts = RunOptions(count=200_000, rate=100_000, sizes="64:1", prefixes=prefixes,
                      output=out, opts=(f"routes4.path={prefixes}", f"routes6.path={prefixes}"))
    info = _route_while_forwarding(opts, "routes4", log)
    assert info.updates == len(log)

    start = {(10 << 24, 8): _hop_rule(ipaddress.IPv4Network("10.0.0.0/8"))}
    _check_replay(out, log, Reference(start))


def _address(addr: int, bits: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.IPv4Address(addr) if bits == 32 else ipaddress.IPv6Address(addr)


def _check_replay(out: Path, log: Sequence[Update | list[Update]], start: Reference) -> None:
    """Each packet was looked up while some number c of updates had completed (c never
    goes back: one core forwards in order), so its hop is the answer of the table
    after c updates or, racing update c + 1, after c + 1. Take the smallest such c."""
    cur, nxt = Reference(start.routes, start.bits), Reference(start.routes, start.bits)
    nxt.apply(log[0])
    c, seen, raced, packets = 0, set(), 0, 0
    with out.open("rb") as f:
        for _, frame in dpkt.pcap.Reader(f):
            eth = dpkt.ethernet.Ethernet(frame)
            dst = int.from_bytes(eth.data.dst, "big")
            hop = int.from_bytes(eth.dst[4:6], "big")
            packets += 1
            # (the table after c + 1 is asked only when the one after c does not answer)
            while hop != cur.lookup(dst) and hop != nxt.lookup(dst):
                assert c < len(log), (
                    f"packet {packets} to {_address(dst, start.bits)} left by hop {hop}: "
                    f"not the table's answer after any update from "
                    f"{min(seen, default=0)} on")
                cur.apply(log[c])
                c += 1
                if c < len(log):
                    nxt.apply(log[c])
            seen.add(c)
            raced += hop != cur.lookup(dst)
    # Packets went out all along the updates, not only before or after them.
    assert packets > 0 and len(seen) > 10, (packets, len(seen))
    print(f"{packets} packets, forwarded at {len(seen)} of {len(log) + 1} table states, "
          f"{raced} matching only the table after update c + 1")


DOC6 = ipaddress.IPv6Network("2001:db8::/32")


def _updates6(n: int, seed: int, targets: list[ipaddress.IPv6Address]) -> list[Update]:
    """n adds and deletes of IPv6 routes covering the target addresses (lengths 33..128,
    now and then 0, 16 or 32 above the table's 2001:db8::/32), a delete only of a
    route the log added and has not deleted."""
    rng = random.Random(seed)
    held: list[Net] = []
    out: list[Update] = []
    while len(out) < n:
        if held and rng.random() < 0.35:
            out.append(("del", held.pop(rng.randrange(len(held))), 0))
            continue
        length = rng.choice([0, 16, 33, 40, 48, 48, 56, 64, 64, 96, 127, 128,
                             rng.randint(33, 128)])
        net = ipaddress.IPv6Network((rng.choice(targets), length), strict=False)
        if net in held or net == DOC6:
            continue
        held.append(net)
        out.append(("add", net, rng.randint(1, 0x7FFF)))
    return out


def _frames6(targets: list[ipaddress.IPv6Address]) -> list[bytes]:
    """An Ethernet/IPv6/UDP frame to each target address."""
    frames = []
    for i, addr in enumerate(targets):
        udp = dpkt.udp.UDP(sport=1000 + i, dport=53, data=b"\0" * 8)
        udp.ulen = len(udp)
        ip = dpkt.ip6.IP6(src=bytes(15) + b"\x01", dst=addr.packed, nxt=17, hlim=64,
                          data=udp, plen=len(udp))
        ip.extension_hdrs = {}
        frames.append(bytes(dpkt.ethernet.Ethernet(
            src=b"\x02" + bytes(5), dst=b"\x02" + bytes(5), type=dpkt.ethernet.ETH_TYPE_IP6,
            data=ip)))
    return frames


def _ipv6_router_run(tmp_path: Path, loops: int, rate: int = 50_000
                     ) -> tuple[RunOptions, list, dict]:
    """The IPv6 router's run: 256 target addresses in 2001:db8::/32, a replayed capture
    of a frame to each (`loops` times, `rate` packets a second), the table at start
    (the /32 and 2,000 other routes for each rebuild to carry); its options, the
    targets, that table."""
    rng = random.Random(6)
    targets = [DOC6.network_address + rng.getrandbits(96) for _ in range(256)]
    prefixes, capture = tmp_path / "routes.txt", tmp_path / "in.pcap"
    others = [ipaddress.IPv6Network((0x2A00 << 112 | rng.getrandbits(32) << 80, 48))
              for _ in range(2000)]
    prefixes.write_text("# the table at start\n2001:db8::/32\n" +
                        "".join(f"{n}\n" for n in others))
    with capture.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for k, fr in enumerate(_frames6(targets)):
            w.writepkt(fr, ts=k * 1e-6)
    opts = RunOptions(input=capture, loops=loops, rate=rate, output=tmp_path / "out.pcap",
                      opts=(f"routes4.path={prefixes}", f"routes6.path={prefixes}"))
    start = {(int(n.network_address), n.prefixlen): _hop_rule(n) for n in [DOC6, *others]}
    return opts, targets, start


def test_router_forwards_ipv6_while_routes_change(tmp_path: Path) -> None:
    """The IPv6 must-show: every packet of a replayed capture checked against the
    update log's tables (each update is a rebuild of the table and one swap)."""
    # the capture replays until the updates are done (far more loops than it needs; the
    # run is then stopped as Ctrl-C stops it: the sources end, the queues drain), so that
    # lookups run beside every update however slowly a loaded machine applies them (with
    # 400 loops, 2 s of traffic, a machine at load 13 applied the log in 12 s)
    opts, targets, start = _ipv6_router_run(tmp_path, loops=100_000, rate=10_000)
    log = _updates6(2000, 7, targets)
    with session(load_program(ROUTER), opts) as s:
        wait_forwarding(s)
        info = apply_log(s.tables["routes6"], log)
        s.stop()
    assert s.result is not None and s.result.ok, s.result
    assert (info.kind, info.updates) == ("lpm6", len(log))
    # No pause: the lookup core kept beginning batches while updates were being built
    # (a design that held lookups back during an update would count none).
    assert info.lookups > 0 and info.lookups_during_updates > 0, info
    print(f"{info.lookups} lookup batches, {info.lookups_during_updates} begun while one "
          f"of the {len(log)} rebuilds ran")
    _check_replay(tmp_path / "out.pcap", log, Reference(start, bits=128))


def test_router_forwards_ipv6_while_route_batches_change(tmp_path: Path) -> None:
    """IPv6 updates in batches over the control channel (Table.apply: one message an
    update, one rebuild a batch): every packet sees the table after c or c + 1 batches,
    never a part of one; a batch with an update the table refuses changes nothing."""
    opts, targets, start = _ipv6_router_run(tmp_path, loops=600)
    log = _updates6(3000, 8, targets)
    batches = [log[k:k + 150] for k in range(0, len(log), 150)]
    with session(load_program(ROUTER), opts) as s:
        wait_forwarding(s)
        routes = s.tables["routes6"]
        rebuilt = routes.info().updates
        for b in batches:
            applied = routes.apply([RouteChange(k, str(n), hop or None) for k, n, hop in b])
            assert applied == len(b)
            time.sleep(0.05)  # spread the batches over the traffic
        info = routes.info()
        # refused whole: an add, then a delete of a route the table lacks
        with pytest.raises(ControlError, match="no route 2001:db8:ffff::/48"):
            routes.apply([RouteChange("add", "2001:db8:fffe::/48", 5),
                          RouteChange("del", "2001:db8:ffff::/48")])
        after = routes.info()
        s.wait_drained(timeout=120)
    assert s.result is not None and s.result.ok, s.result
    assert info.updates - rebuilt == len(log)
    assert (after.updates, after.length) == (info.updates, info.length)
    _check_replay(tmp_path / "out.pcap", batches, Reference(start, bits=128))


def test_arrays_read_and_changed_while_running() -> None:
    with session(load_program(TTL), RunOptions(count=50_000, rate=50_000)) as s:
        counts = s.tables["class_counts"]
        info = counts.info()
        assert (info.kind, info.type, info.size) == ("array", "u", 8)
        counts[info.length - 1] = 12345
        assert counts[info.length - 1] >= 12345  # packets may count on top
        counts[0] = 0
        s.wait_drained(timeout=60)
        before = counts[1]
        counts[1] = before + 7
        assert counts[1] == before + 7
        assert counts.info().updates == 3


def test_control_errors_leave_the_program_running(tmp_path: Path) -> None:
    prefixes = tmp_path / "routes.txt"
    prefixes.write_text("10.0.0.0/8\n192.168.0.0/16\n")
    opts = RunOptions(count=20_000, opts=(f"routes4.path={prefixes}",
                                          f"routes6.path={prefixes}"))
    with session(load_program(ROUTER), opts) as s:
        tables = s.tables
        with pytest.raises(OfflowError, match="no table `nope` with a control channel; tables: "):
            tables["nope"]
        with pytest.raises(OfflowError, match="not a prefix"):
            tables["routes4"].add("10.0.0.1/8", 3)
        with pytest.raises(OfflowError, match="not a prefix"):
            tables["routes4"].add("10.0.0.0/33", 3)
        with pytest.raises(OfflowError, match="next hop 0"):
            tables["routes4"].add("10.0.0.0/9", 0)
        with pytest.raises(ControlError, match="no route 11.0.0.0/8") as e:
            tables["routes4"].delete("11.0.0.0/8")
        assert e.value.errno == 2  # ENOENT
        # the device checks what it is sent, too: a wrong-size route message
        with pytest.raises(ControlError, match="route message of 5 bytes"):
            tables["routes4"].request(b"a\x08\x01\x00\x0a")
        with pytest.raises(OfflowError, match="takes add and delete"):
            tables["routes4"][0]
        with pytest.raises(OfflowError, match="routes4` is an lpm4 route table: "
                                              "2001:db8::/32 needs an lpm6"):
            tables["routes4"].add("2001:db8::/32", 3)
        with pytest.raises(ControlError, match="no route 2001:db8::/32") as e:
            tables["routes6"].delete("2001:db8::/32")
        assert e.value.errno == 2  # ENOENT
        with pytest.raises(OfflowError, match="not a prefix"):
            tables["routes6"].add("2001:db8::1/32", 3)
        with pytest.raises(ControlError, match="bits set past /8"):
            tables["routes6"].request(b"a\x08\x03\x00" + ipaddress.IPv6Address("2001:db8::").packed)
        with pytest.raises(ControlError, match="prefix length 129"):
            tables["routes6"].request(b"d\x81" + bytes(16))
        assert tables["routes4"].info().updates == 0
        assert tables["routes6"].info().updates == 0
        tables["routes4"].add("172.16.0.0/12", 9)  # still served after all that
        s.wait_drained(timeout=60)
    assert s.result is not None and s.result.ok


def test_array_value_of_the_wrong_size_is_refused() -> None:
    with session(load_program(TTL), RunOptions(count=1000)) as s:
        counts = s.tables["class_counts"]
        with pytest.raises(ControlError, match="a value of 3 bytes: elements are 8"):
            counts.request(b"s\x00\x00\x00\x00abc")
        with pytest.raises(OfflowError, match="does not fit its 8-byte elements"):
            counts[0] = -1
        with pytest.raises(OfflowError, match="index 99 is outside"):
            counts[99]
        for index, what in ((slice(1, 3), "slice"), ("a", "str"), (1.0, "float")):
            with pytest.raises(TypeError, match=f"table `class_counts`: an index is an int "
                               rf"\(one element at a time\), not {what}"):
                counts[index]  # type: ignore[index]
        with pytest.raises(ControlError, match="index 99: the table has"):
            counts.request(b"g\x63\x00\x00\x00")
        assert counts.info().updates == 0
        # (a route change meant for a program with no route table of its family)
        with pytest.raises(OfflowError) as e:
            s.tables.route_table("10.0.0.0/8")
        assert str(e.value).startswith("the program has no IPv4 route table (lpm4) for "
                                       "10.0.0.0/8; its tables: "), e.value
        s.wait_drained(timeout=60)
    assert s.result is not None and s.result.ok


def test_an_array_table_is_a_sequence_counted_from_the_end_too() -> None:
    """len() is the table's length; a negative index counts from the end for get and
    set, as a list's; one below -len (or at len) is an IndexError with the range, which
    ends an iteration as a list's does. Before 2026-11-28: no len(), and -1 refused."""
    with session(load_program(TTL), RunOptions(count=1000)) as s:
        s.wait_drained(timeout=60)  # (no packet counts on top of what is set)
        counts = s.tables["class_counts"]
        n = counts.info().length
        assert n > 1 and len(counts) == n
        counts[-1] = 41
        counts[-n] = 42
        assert (counts[n - 1], counts[0], counts[-1], counts[-n]) == (41, 42, 41, 42)
        assert list(counts) == [counts[i] for i in range(n)]
        said = (rf"table `class_counts`: index {{}} is outside 0..{n - 1} "
                rf"\(or -{n}..-1 from the end\)")
        for index in (-n - 1, n):
            with pytest.raises(IndexError, match=said.format(index)):
                counts[index]
            with pytest.raises(OfflowError, match=said.format(index)):
                counts[index] = 0
        assert counts.info().updates == 2
        assert [counts[i] for i in (0, -1)] == [42, 41]
    assert s.result is not None and s.result.ok


def test_offlow_ctl_counts_an_index_from_the_end_too() -> None:
    """`offlow ctl WINDOW table NAME get -2` (its index was 0.. only before
    2026-11-28); one below -len is the one error with the range."""
    with session(load_program(TTL), RunOptions(count=1000)) as s:
        s.wait_drained(timeout=60)
        ctl = ("ctl", str(s.window), "table", "class_counts")
        info = offlow_cli(*ctl, "info")
        n = int(re.search(r"length (\d+)", info.stdout)[1])  # type: ignore[index]
        assert offlow_cli(*ctl, "set", "-2", "7").returncode == 0
        got, last = offlow_cli(*ctl, "get", "-2"), offlow_cli(*ctl, "get", str(n - 2))
        assert (got.returncode, got.stdout, last.stdout) == (0, "7\n", "7\n"), got.stderr
        far = offlow_cli(*ctl, "get", str(-n - 1))
        assert far.returncode == 2 and far.stderr == (
            f"offlow: error: table `class_counts`: index {-n - 1} is outside 0..{n - 1} "
            f"(or -{n}..-1 from the end)\n")
    assert s.result is not None and s.result.ok


def test_a_slice_of_a_table_is_one_type_error_before_anything_is_asked() -> None:
    """Each element is a request of its own, so a slice (whose values would not be one
    moment's) is refused, before the table is asked anything (it asked for the table's
    info first, waiting for its device, before 2026-11-28)."""
    def channel() -> Any:
        raise AssertionError("the table was asked")

    t = Table("counts", channel)
    said = ("table `counts`: an index is an int (one element at a time), not slice: each "
            "element is a request of its own, so read a range one index at a time")
    with pytest.raises(TypeError, match=re.escape(said)):
        t[1:3]  # type: ignore[index]
    with pytest.raises(TypeError, match=re.escape(said)):
        t[1:3] = [1, 2]  # type: ignore[index]


def test_offlow_ctl_command_line(tmp_path: Path) -> None:
    prefixes = tmp_path / "routes.txt"
    prefixes.write_text("10.0.0.0/8\n")
    opts = RunOptions(count=1000, opts=(f"routes4.path={prefixes}", f"routes6.path={prefixes}"))
    with session(load_program(ROUTER), opts) as s:
        def ctl(*args: str) -> subprocess.CompletedProcess[str]:
            return offlow_cli("ctl", str(s.window), *args)

        add = ctl("route", "add", "172.16.0.0/12", "7")
        bad = ctl("route", "add", "172.16.0.0/33", "7")
        gone = ctl("route", "del", "1.0.0.0/8")
        listed = ctl("tables")
        assert add.returncode == 0, add.stderr
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a prefix" in bad.stderr
        assert gone.returncode == 2 and "no route 1.0.0.0/8" in gone.stderr
        assert "routes4: lpm4, 2 routes, 1 updates" in listed.stdout, listed.stdout
        # a file of routes: the IPv6 ones in one batch, the IPv4 ones each in place
        routes = tmp_path / "more.txt"
        routes.write_text("# routes to add\n2001:db8::/32 5\n2001:db8:1::/48 6  # a comment\n"
                          "\n192.168.0.0/16 8\n2001:db8:2::/48 7\n")
        added = ctl("route", "add", "--file", str(routes))
        listed = ctl("tables")
        deleted = ctl("route", "del", "--file", str(routes))
        assert added.returncode == 0, added.stderr
        assert added.stdout.splitlines() == ["routes6: 3 routes added",
                                             "routes4: 1 routes added"], added.stdout
        assert "routes6: lpm6, 3 routes, 3 updates" in listed.stdout, listed.stdout
        assert "routes4: lpm4, 3 routes, 2 updates" in listed.stdout, listed.stdout
        assert deleted.returncode == 0, deleted.stderr
        bad = tmp_path / "bad.txt"
        bad.write_text("2001:db8:3::/48 5\n2001:db8:4::1/48 5\n")
        refused = ctl("route", "add", "--file", str(bad))
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1
        assert f"{bad}:2: " in refused.stderr and "not a prefix" in refused.stderr
        bad.write_text("2001:db8:3::/48 5\n2001:db8:5::/48\n")
        refused = ctl("route", "add", "--file", str(bad))
        assert refused.returncode == 2 and f"{bad}:2: want PREFIX NEXTHOP" in refused.stderr
        bad.write_text("2001:db8:3::/48\n2001:db8:5::/48\n")
        refused = ctl("route", "del", "--file", str(bad))
        assert refused.returncode == 2 and "no route 2001:db8:3::/48" in refused.stderr
        listed = ctl("tables")
        assert "routes6: lpm6, 0 routes, 6 updates" in listed.stdout, listed.stdout
        s.wait_drained(timeout=60)


def _counting_program(table: str) -> Program:
    """A user's program: one table of their own naming, counted into on the host."""
    p = Program("user_counts")
    counts = Shared(table, "uint16_t", 3)
    src, count, out = Source("in"), Count("tally", slot=2, counts=counts), Sink("out")
    src >> count >> out
    p.segment("only", [src, count, out], device="host", cores=[0])
    return p


def test_every_table_has_a_control_channel_unless_its_name_is_too_long() -> None:
    short = plan_program(_counting_program("tally_by_class"))
    assert short.program_channels == ("ctl.tally_by_class",)
    # "ctl." + 28 characters is longer than a channel name may be: no control, no error
    long_name = "t" * (CHANNEL_NAME_MAX - len(CTL_CHANNEL_PREFIX) + 1)
    assert plan_program(_counting_program(long_name)).program_channels == ()


def test_a_program_channel_may_not_take_a_control_channel_name() -> None:
    with pytest.raises(OfflowError, match="names starting with `ctl.` are the tables'"):
        _counting_program("x").channel("ctl.mine", Handler("h"))


def test_user_array_of_odd_size_read_and_set() -> None:
    with session(_counting_program("tally_by_class"), RunOptions(count=300)) as s:
        s.wait_drained(timeout=60)
        tally = s.tables["tally_by_class"]
        assert tally.info() == Info("array", "u", 2, 3, 0)
        assert [tally[i] for i in range(3)] == [0, 0, 300]
        tally[0] = 65535
        with pytest.raises(OfflowError, match="65536 does not fit its 2-byte elements"):
            tally[1] = 65536
        assert [tally[i] for i in range(3)] == [65535, 0, 300]


def _late_device(region: Region, after: float) -> threading.Thread:
    """A device that opens its end of channel `c` `after` s from now (a remote device
    still starting on its machine) and answers one control request with status 0."""

    def serve() -> None:
        time.sleep(after)
        dev = region.channel("c", SIDE_B)
        dev.recv(timeout=30)
        dev.send(struct.pack("<i", 0) + b"up", timeout=30)
    t = threading.Thread(target=serve)
    t.start()
    return t


def test_a_control_request_waits_for_its_device_to_be_up(tmp_path: Path) -> None:
    """A table's first request made before its device serves the control channel waits
    for the device (up to UP_WAIT_S), not inside the request's own timeout: a device up
    after 1 s answers a request with a 0.2 s timeout (it timed out before, and callers
    retried); one never up gives one clear error naming the table once the limit
    passed, not a timeout."""
    region = Region.create(tmp_path / "window", ["c"])
    try:
        t = _late_device(region, 1.0)
        assert Table("routes", lambda: region.channel("c")).request(b"i", timeout=0.2) == b"up"
        t.join()
    finally:
        region.close()
    region = Region.create(tmp_path / "window2", ["c"])
    try:
        with pytest.raises(OfflowError, match=r"^table `routes`: its device is not up yet \(it "
                                              r"has not served the table's control channel "
                                              r"within 0\.3 s"):
            Table("routes", lambda: region.channel("c"), up_wait=0.3).info()
    finally:
        region.close()
