"""Tuple files (offlow.streams.tuples): CSV and binary files read back what was written,
the seed's tuples are 164-byte records, lines and records that hold no tuple are skipped
and counted, and mangled files never raise anything but one clear error (a seeded
mutation fuzz of both parsers). Captures of tuples are read back by dpkt."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import dpkt
import pytest

from offlow.cli import main
from offlow.errors import OfflowError
from offlow.streams.tuples import (
    MAX_VALUES,
    SEED_VALUES,
    Tuple,
    generate,
    parse_binary,
    parse_csv,
    read_tuples,
    values_of,
    write_binary,
    write_csv,
    write_pcap,
)


def test_csv_and_binary_files_read_back_what_was_written(tmp_path: Path) -> None:
    tuples = generate(1, 300, values=SEED_VALUES, low=-(1 << 31), high=(1 << 31) - 1)
    write_csv(tmp_path / "t.csv", tuples)
    write_binary(tmp_path / "t.bin", tuples)
    assert read_tuples(tmp_path / "t.csv").tuples == tuples
    got = read_tuples(tmp_path / "t.bin")
    assert got.tuples == tuples and got.bad == 0
    assert (tmp_path / "t.bin").stat().st_size == 12 + 300 * 164  # the seed's 164 B tuples


def test_lines_and_records_that_hold_no_tuple_are_skipped_and_counted() -> None:
    text = "# a comment\n\n1,2,3\n x ,1\n-5,1\n7\n8,4294967296\n9, 10 ,11\n" + \
           "10," + ",".join(["1"] * (MAX_VALUES + 1)) + "\n"
    got = parse_csv(text, "t.csv")
    assert got.tuples == [Tuple(1, (2, 3)), Tuple(9, (10, 11))]
    assert got.bad == 5 and got.where[0] == "t.csv:4: not integers"
    rec = struct.pack("<q2i", 5, 1, 2)
    data = b"OFLTUPLE" + struct.pack("<I", 2) + rec + struct.pack("<q2i", -1, 0, 0) + rec[:7]
    got = parse_binary(data, "t.bin")
    assert got.tuples == [Tuple(5, (1, 2))] and got.bad == 2
    assert "record 2: cut short (7 of 16 bytes)" in got.where[1]


@pytest.mark.parametrize("data", [b"", b"OFLTUPLE\x05", b"OFLTUPLE\x00\x00\x00\x00",
                                  b"OFLTUPLE\x81\x00\x00\x00", b"\xff\xfe,1,2\n"])
def test_a_file_that_is_no_tuple_file_is_one_clear_error(data: bytes, tmp_path: Path) -> None:
    f = tmp_path / "t.dat"
    f.write_bytes(data)
    if data == b"":
        assert read_tuples(f).tuples == []  # an empty CSV
        return
    with pytest.raises(OfflowError, match="t.dat"):
        read_tuples(f)


def test_mangled_files_give_tuples_or_one_clear_error(tmp_path: Path) -> None:
    """A mutation fuzz: bytes flipped, cut, repeated and inserted in a valid CSV and a
    valid binary file; reading gives valid tuples and counts, or an OfflowError."""
    rng = random.Random(7)
    tuples = generate(2, 20, values=5, low=-1000, high=1000)
    write_csv(tmp_path / "t.csv", tuples)
    write_binary(tmp_path / "t.bin", tuples)
    seeds = [(tmp_path / "t.csv").read_bytes(), (tmp_path / "t.bin").read_bytes()]
    f = tmp_path / "m"
    for k in range(4000):
        b = bytearray(seeds[k % 2])
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b) + 1)
            op = rng.randrange(4)
            if op == 0 and i < len(b):
                b[i] = rng.randrange(256)
            elif op == 1:
                del b[i:i + rng.randint(1, 30)]
            elif op == 2:
                b[i:i] = bytes(rng.choice(b",-0123456789\n#x \xff") for _ in range(5))
            else:
                b[i:i] = b[i:i + rng.randint(1, 40)]
        f.write_bytes(bytes(b))
        try:
            got = read_tuples(f)
        except OfflowError:
            continue
        for t in got.tuples:
            assert t.ts >= 0 and 0 < len(t.v) <= MAX_VALUES
            assert all(-(1 << 31) <= x < 1 << 31 for x in t.v)


def test_a_capture_of_tuples_reads_back_with_dpkt(tmp_path: Path) -> None:
    tuples = generate(3, 50, values=4, low=-9, high=9) + [Tuple(1, (2,))]
    write_pcap(tmp_path / "t.pcap", [(t, 7000 + k) for k, t in enumerate(tuples)])
    with open(tmp_path / "t.pcap", "rb") as fh:
        got = [(int(ts * 10**9), bytes(buf)) for ts, buf in dpkt.pcap.Reader(fh)]
    assert [ts for ts, _ in got] == [t.ts for t in tuples]
    for k, ((_, buf), t) in enumerate(zip(got, tuples, strict=True)):
        udp = dpkt.ethernet.Ethernet(buf).data.data
        assert udp.dport == 7000 + k and values_of(buf) == t.v
        assert struct.unpack(f"<{len(t.v)}i", udp.data) == t.v


def test_the_tuples_command_generates_and_converts(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tuples", "generate", str(tmp_path / "g.bin"), "--count", "40",
                 "--seed", "9", "--disorder", "3"]) == 0
    assert main(["tuples", "convert", str(tmp_path / "g.bin"), str(tmp_path / "g.pcap"),
                 "--port", "9000"]) == 0
    want = generate(9, 40, disorder=3)
    with open(tmp_path / "g.pcap", "rb") as fh:
        got = [values_of(bytes(buf)) for _, buf in dpkt.pcap.Reader(fh)]
    assert got == [t.v for t in want]
    assert main(["tuples", "convert", str(tmp_path / "g.bin"), str(tmp_path / "g.txt")]) == 2
    assert "name a .pcap file" in capsys.readouterr().err
