"""offlow/mapreport.py: a shared hash map's report shows each key field by its declared
type (`ipv4`, `ipv6`, `mac`: an address's bytes as on the wire, shown as an address;
integers as numbers), sorted by key, the same on every target. tests/programs/talkers.py
(a user's maps keyed by MAC, IPv4 and IPv6 addresses) on the NIC and on xdp (a BPF hash
map walked through its fd, frames through a veth pair) against scapy's reading of the
capture."""

from __future__ import annotations

import ipaddress
import random
from collections import Counter
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap, wrpcap

from offlow import OfflowError, SharedMap
from offlow.build import build
from offlow.codegen.mapdecl import key_struct
from offlow.dsl.loader import load_program
from offlow.dsl.values import map_table
from offlow.mapreport import decode
from offlow.report import format_summary, summarize
from offlow.runner import RunOptions, run
from offlow.targets import xdp
from tests.e2e import ROOT

TALKERS = ROOT / "tests" / "programs" / "talkers.py"
WHY_NOT = xdp.TARGET.unusable()


def test_address_fields_are_shown_as_addresses_and_sorted_by_their_bytes() -> None:
    t = map_table(SharedMap("peers", (("hw", "mac"), ("v4", "ipv4"), ("v6", "ipv6"),
                                      ("port", "uint16_t")), "uint32_t", 5))
    hw, v6 = "0200000000aa", "20010db8" + "0" * 22 + "01"
    raw = {"kind": "map", "items": 2, "entries": 5, "full": 0,
           # 10.0.0.1 and 9.255.0.7, port 53 (little-endian 16 bits), values 7 and 3
           "pairs": [f"{hw}0a000001{v6}3500=07000000", f"{hw}09ff0007{v6}3500=03000000"]}
    m = decode(t, raw)
    assert m["key"] == ["hw", "v4", "v6", "port"]
    assert m["pairs"] == [[["02:00:00:00:00:aa", "9.255.0.7", "2001:db8::1", 53], 3],
                          [["02:00:00:00:00:aa", "10.0.0.1", "2001:db8::1", 53], 7]]
    assert key_struct(t)[1:6] == ["struct peers_key {", "    uint8_t hw[6];",
                                  "    uint8_t v4[4];", "    uint8_t v6[16];",
                                  "    uint16_t port;"]


def test_an_unknown_key_type_names_the_address_types_too() -> None:
    with pytest.raises(OfflowError, match=r"key field `a` has type 'ip4'; a key field is one "
                                          r"of uint8_t, .*, ipv4, ipv6, mac$"):
        SharedMap("m", (("a", "ip4"),))


def _capture(path: Path) -> None:
    """IPv4 (UDP and TCP) and IPv6 frames from three stations, odd lengths."""
    rnd = random.Random(9)
    macs = ["02:00:00:00:00:0a", "52:54:00:12:34:56", "fe:ed:fa:ce:be:ef"]
    v4 = ["192.0.2.1", "10.1.2.3", "198.51.100.254", "9.9.9.9"]
    v6 = ["2001:db8::1", "fe80::1:2", "2001:db8:85a3::8a2e:370:7334"]
    frames = []
    for i in range(80):
        eth = Ether(src=rnd.choice(macs), dst="02:00:00:00:00:01")
        pad = b"x" * rnd.randint(0, 41)
        if i % 5 < 3:
            l4 = UDP(sport=1000 + i, dport=53) if i % 2 else TCP(sport=1000 + i, dport=80)
            frames.append(eth / IP(src=rnd.choice(v4), dst="203.0.113.9") / l4 / pad)
        else:
            frames.append(eth / IPv6(src=rnd.choice(v6), dst="2001:db8::9",
                                     hlim=rnd.choice([1, 64, 255])) / UDP(dport=53) / pad)
    wrpcap(str(path), frames)


def _expected(path: Path) -> tuple[list[list[object]], list[list[object]]]:
    """The two maps' pairs as scapy reads the capture, sorted as addresses sort."""
    four: Counter[tuple[str, str, int]] = Counter()
    six: Counter[tuple[str, int]] = Counter()
    for f in rdpcap(str(path)):
        if IP in f:
            four[(f[Ether].src, f[IP].src, f[IP].proto)] += 1
        else:
            six[(f[IPv6].src, f[IPv6].hlim)] += 1
    order4 = sorted(four, key=lambda k: (bytes.fromhex(k[0].replace(":", "")),
                                         ipaddress.ip_address(k[1]), k[2]))
    order6 = sorted(six, key=lambda k: (ipaddress.ip_address(k[0]), k[1]))
    return ([[list(k), four[k]] for k in order4], [[list(k), six[k]] for k in order6])


@pytest.mark.parametrize("device", [
    "nic", pytest.param("xdp", marks=pytest.mark.skipif(
        WHY_NOT is not None, reason=f"xdp cannot run here: {WHY_NOT}"))])
def test_the_talkers_maps_show_their_addresses(device: str, tmp_path: Path) -> None:
    cap = tmp_path / "talk.pcap"
    _capture(cap)
    b = build(load_program(TALKERS, [f"edge.device={device}"]))
    res = run(b, RunOptions(input=cap, output=tmp_path / "out.pcap", timeout=60))
    assert res.ok, res.errors
    s = summarize(b.plan, res.stats)
    four, six = _expected(cap)
    assert len(four) > 12 and len(six) > 5
    assert s["tables"]["talk4"]["pairs"] == four
    assert s["tables"]["talk6"]["pairs"] == six
    lines = format_summary(s).splitlines()
    head = lines.index(f"table talk6: a hash map, {len(six)} of 11 entries, 0 updates "
                       "refused (full)")
    assert [r.split() for r in lines[head + 1:head + 2 + len(six)]] == [
        ["client6", "hops", "value"], *([k, str(h), str(v)] for (k, h), v in six)]
    head = lines.index(f"table talk4: a hash map, {len(four)} of 37 entries, 0 updates "
                       "refused (full)")
    assert lines[head + 2].split() == [*map(str, four[0][0]), str(four[0][1])]
