"""MAKE: an element sends packets it built, any number per packet it takes (one send
cut into many). A user's program (tests/programs/chunks.py) cuts every UDP datagram
of the QUIC capture into 37-byte pieces on the NIC and writes them out on the host;
dpkt reads input and output and says what the pieces must be."""

from __future__ import annotations

import struct
from pathlib import Path

import dpkt
import pytest

from offlow.dsl.loader import load_program
from offlow.errors import OfflowError
from offlow.netsum import csum
from offlow.passes.cbody import BodyError, analyze_body
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from tests.e2e import QUIC, read_frames

CHUNKS = Path(__file__).resolve().parent / "programs" / "chunks.py"
PIECE = 37


def _expected(frames: list[bytes]) -> tuple[list[bytes], int, int]:
    """The UDP payloads of the pieces in order, the datagrams, the other IPv4 packets."""
    pieces, datagrams, others = [], 0, 0
    for buf in frames:
        eth = dpkt.ethernet.Ethernet(buf)
        if not isinstance(eth.data, dpkt.ip.IP):
            continue
        if isinstance(eth.data.data, dpkt.udp.UDP):
            datagrams += 1
            pay = bytes(eth.data.data.data)
            pieces += [pay[i:i + PIECE] for i in range(0, len(pay), PIECE)]
        else:
            others += 1
    return pieces, datagrams, others


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[bytes]]:
    out = tmp_path_factory.mktemp("make") / "out.pcap"
    o = RunOptions(input=QUIC, output=out, timeout=60)
    b = build_for(load_program(CHUNKS), o, werror=True)
    res = run(b, o)
    assert res.ok, res.errors
    return summarize(b.plan, res.stats), read_frames(out)


def test_each_datagram_becomes_its_pieces_in_order_with_valid_headers(
        chunked: tuple[dict, list[bytes]]) -> None:
    _, out = chunked
    pieces, datagrams, others = _expected(read_frames(QUIC))
    assert datagrams > 50 and len(pieces) > 3 * datagrams  # the capture has long datagrams
    got = []
    for buf in out:
        ip = dpkt.ethernet.Ethernet(buf).data
        if not isinstance(ip.data, dpkt.udp.UDP):
            continue
        udp = ip.data
        raw_ip = bytes(buf[14:14 + ip.hl * 4])
        assert csum(raw_ip) == 0                            # IPv4 header checksum
        assert ip.len == len(buf) - 14 and udp.ulen == ip.len - ip.hl * 4
        seg = bytes(buf[14 + ip.hl * 4:14 + ip.len])
        pseudo = raw_ip[12:20] + struct.pack("!BBH", 0, 17, len(seg))
        assert csum(pseudo + seg) == 0                      # UDP checksum
        got.append(bytes(udp.data))
    assert got == pieces
    assert all(0 < len(p) <= PIECE for p in got)
    assert len(out) == len(pieces) + others                   # the others as they were


def test_made_packets_are_counted_and_every_packet_accounted_for(
        chunked: tuple[dict, list[bytes]]) -> None:
    s, _ = chunked
    pieces, datagrams, others = _expected(read_frames(QUIC))
    el = s["elements"]
    assert el["cutter"]["made"] == len(pieces)
    assert el["cutter"]["consumed"] == datagrams
    # the jumbo element's made packets are one byte over the mtu: dropped, with why
    assert el["jumbo"]["made"] == others and el["jumbo"]["why"]["made_too_long"] == others
    a = s["accounting"]
    assert a["made"] == len(pieces) + others
    assert a["unaccounted"] == 0 and a["forwarded"] == len(pieces) + others
    assert {"at": "jumbo", "reason": "made_too_long", "packets": others,
            "what": "a packet it made (MAKE) is longer than the mtu"} in a["dropped"]


def test_make_is_checked_like_emit() -> None:
    def body(text: str) -> object:
        return analyze_body(text, element="cut", outputs=["piece_out", "other"],
                            fields={"l3_off": "uint32_t"})

    info = body("struct ofl_pkt one = *pkt; /* a piece */ MAKE(piece_out, &one); CONSUME();")
    assert info.makes == frozenset({"piece_out"}) and "piece_out" in info.emits
    assert not info.may_fall_through
    # MAKE goes on: a body that ends with it falls through
    assert body("MAKE(other, pkt);").may_fall_through
    with pytest.raises(BodyError, match=r"MAKE\(`pieces`\): no output port `pieces`.*"
                                        r"did you mean `piece_out`"):
        body("MAKE(pieces, pkt);")
    with pytest.raises(BodyError, match=r"MAKE\(\) takes an output port name and a packet"):
        body("MAKE(piece_out);")


def test_a_program_whose_make_names_no_port_is_one_clear_error(tmp_path: Path) -> None:
    prog = tmp_path / "bad_make.py"
    prog.write_text(CHUNKS.read_text().replace("MAKE(piece_out, &one);", "MAKE(pieces, &one);"))
    with pytest.raises(OfflowError, match=r"bad_make.py:\d+: element `cutter`: "
                                          r"MAKE\(`pieces`\): no output port"):
        build_for(load_program(prog), RunOptions(input=QUIC))
