"""The router example end to end on a slice of the real BGP table: every forwarded
packet leaves with the next hop an independent reference computes for its destination,
a decremented TTL / hop limit and a valid checksum; unroutable packets are counted drops."""

from __future__ import annotations

import gzip
import ipaddress
import random
import struct
from pathlib import Path

import dpkt
import pytest

from offlow import OfflowError
from offlow.router.reference import Reference
from tests.e2e import DATA, ROOT, read_frames, run_example

ROUTER = ROOT / "examples" / "router.py"
BGP = DATA / "bgp-full-table.txt.gz"


def bgp_slice(n4: int, n6: int) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Every k-th prefix of the real table, so the slice spans the address space."""
    with gzip.open(BGP, "rt") as f:
        lines = [ln.strip() for ln in f if ln.strip()]
    v4 = [ln for ln in lines if ":" not in ln]
    v6 = [ln for ln in lines if ":" in ln]
    pick = v4[:: len(v4) // n4][:n4] + v6[:: len(v6) // n6][:n6]
    return [ipaddress.ip_network(p) for p in pick]


def frames_to(nets: list, rng: random.Random, count: int) -> list[bytes]:
    """Ethernet/IP/UDP frames to addresses inside the prefixes, plus random ones."""
    frames = []
    for i in range(count):
        net = rng.choice(nets)
        if i % 4 == 3:  # a random address: often unroutable in a slice
            addr = (ipaddress.IPv4Address(rng.getrandbits(32)) if net.version == 4
                    else ipaddress.IPv6Address(rng.getrandbits(128)))
        else:
            addr = net.network_address + rng.randrange(net.num_addresses)
        udp = dpkt.udp.UDP(sport=1000 + i, dport=53, data=struct.pack("!I", i))
        udp.ulen = len(udp)
        if net.version == 4:
            ip = dpkt.ip.IP(src=bytes([10, 0, 0, 1]), dst=addr.packed, p=17, ttl=64, data=udp)
            etype = dpkt.ethernet.ETH_TYPE_IP
        else:
            ip = dpkt.ip6.IP6(src=bytes(15) + b"\x01", dst=addr.packed, nxt=17, hlim=64,
                              data=udp, plen=len(udp))
            ip.extension_hdrs = {}
            etype = dpkt.ethernet.ETH_TYPE_IP6
        eth = dpkt.ethernet.Ethernet(src=b"\x02" + bytes(5), dst=b"\x02" + bytes(4) + b"\x09",
                                     type=etype, data=ip)
        frames.append(bytes(eth))
    return frames


def write_pcap(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f)
        for k, fr in enumerate(frames):
            w.writepkt(fr, ts=k * 1e-6)


@pytest.mark.parametrize("placement", [
    [], ["route.device=host"], ["route.cores=0,1", "route.group=on"]],
    ids=["nic", "host", "nic-core-group"])
def test_router_forwards_to_the_reference_next_hop(placement: list[str], tmp_path: Path) -> None:
    _forwards_to_the_reference(placement, tmp_path)


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


LEVEL_FLAGS = {"scalar": (), "avx2": ("avx2",), "avx512": ("avx512f", "avx512bw", "avx512vl")}


@pytest.mark.parametrize("level", list(LEVEL_FLAGS))
def test_router_vector_lookups_on_each_simd_path(level: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The router's vector lookup elements take the table's batched path
    (ofl_lpm4_lookup_batch), forced with OFFLOW_SIMD: every path forwards to the
    reference's next hop (docs/simd.md)."""
    lacks = [f for f in LEVEL_FLAGS[level] if f not in _cpu_flags()]
    if lacks:
        pytest.skip(f"CPU lacks {level} ({', '.join(lacks)})")
    monkeypatch.setenv("OFFLOW_SIMD", level)
    _forwards_to_the_reference(["route.device=host"], tmp_path)


def _forwards_to_the_reference(placement: list[str], tmp_path: Path) -> None:
    """Run the router on a slice and check every output frame against the reference."""
    nets = bgp_slice(3000, 1000)
    table = tmp_path / "slice.txt"
    table.write_text("".join(f"{n}\n" for n in nets))
    ref = Reference.from_networks(nets)
    frames = frames_to(nets, random.Random(7), 2000)
    capture, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    write_pcap(capture, frames)

    s = run_example(placement, program=ROUTER, input=capture, output=out,
                    opts=(f"routes4.path={table}", f"routes6.path={table}"))
    assert s["ok"], s["errors"]

    want: dict[bytes, int] = {}  # UDP payload -> expected hop
    unroutable = {4: 0, 6: 0}
    for fr in frames:
        ip = dpkt.ethernet.Ethernet(fr).data
        version = 4 if isinstance(ip, dpkt.ip.IP) else 6
        hop = ref.lookup(ipaddress.ip_address(ip.dst))
        if hop:
            want[bytes(ip.data.data)] = hop
        else:
            unroutable[version] += 1
    assert 0 < sum(unroutable.values()) < len(frames) // 2  # the test covers both cases

    got = read_frames(out)
    assert len(got) == len(want)
    for fr in got:
        eth = dpkt.ethernet.Ethernet(fr)
        ip = eth.data
        hop = want[bytes(ip.data.data)]
        assert eth.dst == bytes([2, 0, 0, 1, hop >> 8, hop & 0xFF])
        assert eth.src == bytes([2, 0, 0, 0, hop >> 8, hop & 0xFF])
        if isinstance(ip, dpkt.ip.IP):
            assert ip.ttl == 63
            hdr = fr[14:14 + ip.hl * 4]
            assert sum(struct.unpack(f"!{len(hdr) // 2}H", hdr)) % 0xFFFF == 0
        else:
            assert ip.hlim == 63
    assert s["elements"]["lpm4"]["drop"] == unroutable[4]
    assert s["elements"]["lpm6"]["drop"] == unroutable[6]
    route = next(x for x in s["segments"] if x["segment"] == "route")
    assert route["device"] == ("host" if "route.device=host" in placement else "nic")
    assert len(route["cores"]) == (2 if "route.group=on" in placement else 1)


def test_router_with_a_missing_prefix_file_fails_clearly(tmp_path: Path) -> None:
    """Before any process starts (a table's path= must name a file)."""
    with pytest.raises(OfflowError, match=f"table `routes4`: path={tmp_path}/missing.txt: "
                                          "no such file"):
        run_example(program=ROUTER, input=DATA / "quic.pcap",
                    opts=(f"routes4.path={tmp_path / 'missing.txt'}",))


def test_router_drops_and_counts_malformed_packets(tmp_path: Path) -> None:
    from offlow.testing.malformed import write_malformed_pcap

    capture, table = tmp_path / "bad.pcap", tmp_path / "t.txt"
    table.write_text("0.0.0.0/0\n::/0\n")  # default routes: every valid packet is routable
    want = write_malformed_pcap(capture)
    out = tmp_path / "out.pcap"
    s = run_example(program=ROUTER, input=capture, output=out,
                    opts=(f"routes4.path={table}", f"routes6.path={table}"))
    assert s["ok"], s["errors"]
    el = s["elements"]
    assert el["eth"]["drop"] == want["bad_eth"]
    assert el["ip4"]["drop"] == want["bad_ipv4"]
    assert el["ip6"]["drop"] == want["bad_ipv6"]
    # the router does not parse transport headers: bad_l4 frames are forwarded
    assert len(read_frames(out)) == want["valid_ipv4"] + want["valid_ipv6"] + want["bad_l4"]


def test_tables_on_the_nic_are_sent_by_the_host_over_a_bulk_channel() -> None:
    from offlow.build import compile_program, plan_graph
    from offlow.dsl.loader import load_program
    from offlow.explain import explain

    on_nic = plan_graph(compile_program(load_program(ROUTER))).graph
    assert all(t.bulk and t.home == "nic" for t in on_nic.shared)
    assert "sends it over the bulk channel table.routes4 (CRC32C checked), nic builds it" in (
        explain(plan_graph(on_nic)))
    on_host = plan_graph(compile_program(load_program(ROUTER, ["route.device=host"]))).graph
    assert not any(t.bulk for t in on_host.shared)
    assert "built at start-up by the host process" in explain(plan_graph(on_host))
