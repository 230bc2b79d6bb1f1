"""`offlow router check`: the C tables agree with the Python reference on a slice of
the BGP table (with default and host routes added), and the check notices a wrong
answer on either side. The reference itself is pinned on hand-made cases."""

from __future__ import annotations

import gzip
import ipaddress
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from offlow.errors import OfflowError
from offlow.router import check
from offlow.router.reference import Reference, next_hop, parse_line, read_prefixes

BGP = check.DEFAULT_PREFIXES
EXTRA = ["0.0.0.0/0", "::/0", "192.0.2.1/32", "192.0.2.0/24", "192.0.2.128/25",
         "2001:db8::1/128", "2001:db8::/32", "2001:db8::/64", "2001:db8::8000:0:0:0/65",
         "10.0.0.0/8 65000 extra columns", "# a comment", "", "garbage", "10.0.0.0/8"]


def _slice_lines() -> list[str]:
    """About 4,000 IPv4 and 1,000 IPv6 prefixes: every k-th line of the BGP table, or
    random nested prefixes when the table is not there."""
    if BGP.exists():
        lines = gzip.decompress(BGP.read_bytes()).decode().splitlines()
        v4 = [s for s in lines if ":" not in s][::225]
        v6 = [s for s in lines if ":" in s][::160]
        return v4 + v6
    rng = random.Random(5)
    out = []
    for _ in range(4000):
        n = ipaddress.ip_network((rng.getrandbits(32), rng.randint(8, 32)), strict=False)
        out.append(str(n))
    for _ in range(1000):
        n = ipaddress.ip_network(((0x2001 << 112) | rng.getrandbits(112), rng.randint(16, 64)),
                                 strict=False)
        out.append(str(n))
    return out


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("routes") / "slice.txt"
    lines = _slice_lines()
    random.Random(1).shuffle(lines)
    p.write_text("\n".join(lines[:2000] + EXTRA + lines[2000:]) + "\n")
    return p


def test_check_finds_no_mismatch_on_a_slice(slice_file: Path) -> None:
    r = check.run_check(slice_file, random=20_000, seed=3)
    assert r["ok"], check.format_report(r)
    assert r["mismatches"] == 0 and r["parse_agrees"]
    assert r["garbage_lines"] == r["c_garbage_lines"] == 1
    assert r["routes4"] > 3000 and r["routes6"] > 900
    assert r["v4"]["addresses"] == 2 * r["routes4"] + 20_000
    assert r["v6"]["addresses"] == 2 * r["routes6"] + 20_000
    assert r["addresses"] == r["v4"]["addresses"] + r["v6"]["addresses"]
    assert r["reference_sample"] == 2 * check.SAMPLE


def test_cli_prints_counts_and_exits_zero(slice_file: Path, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    rc = check.main(["--prefixes", str(slice_file), "--random", "1000", "--seed", "4",
                     "--json-out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "addresses checked, 0 mismatches" in text and text.count("0 mismatches") >= 3
    assert '"mismatches": 0' in out.read_text()


def test_check_detects_a_wrong_reference(slice_file: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Every reference hop off by one port: the C answers no longer agree.
    monkeypatch.setattr(check, "next_hop", lambda n, p: next_hop(n, p) % p + 1)
    r = check.run_check(slice_file, random=1000, seed=3)
    assert not r["ok"]
    assert r["v4"]["mismatches"] > 1000 and r["v6"]["mismatches"] > 100
    assert len(r["examples"]) == check.EXAMPLES
    assert "FAILED" in check.format_report(r)


def test_check_detects_one_wrong_c_answer(slice_file: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    real = check._run_driver

    def corrupt(*args):
        summary, hops = real(*args)
        hops["hops4_batch"][17] ^= 1      # one batched IPv4 answer
        hops["hops6_scalar"][5] ^= 2      # one scalar IPv6 answer
        hops["hops6_levels"][9] ^= 4      # one answer of the gpu target's hash levels
        return summary, hops

    monkeypatch.setattr(check, "_run_driver", corrupt)
    r = check.run_check(slice_file, random=1000, seed=3)
    assert not r["ok"] and r["mismatches"] == 3
    assert (r["v4"]["mismatches_batch"], r["v4"]["mismatches_scalar"]) == (1, 0)
    assert (r["v6"]["mismatches_batch"], r["v6"]["mismatches_scalar"]) == (0, 1)
    assert r["v6"]["mismatches_levels"] == 1
    assert {e["family"] for e in r["examples"]} == {"IPv4", "IPv6"}
    assert check.main(["--prefixes", str(slice_file), "--random", "10"]) == 1


def test_missing_prefix_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OfflowError, match="not found"):
        check.run_check(tmp_path / "nope.txt", random=10)
    assert check.main(["--prefixes", str(tmp_path / "nope.txt")]) == 2


def test_driver_names_a_file_it_cannot_read_or_write(slice_file: Path, tmp_path: Path) -> None:
    exe = check.build_driver()
    a4 = tmp_path / "a4"
    a4.write_bytes(np.arange(64, dtype=np.uint32).tobytes())
    missing = tmp_path / "no-such-addresses"
    res = subprocess.run([str(exe), str(slice_file), "4", str(a4), str(missing),
                          str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and f"{missing}: No such file or directory" in res.stderr
    out = tmp_path / "no-such-dir"
    res = subprocess.run([str(exe), str(slice_file), "4", str(a4), str(a4), str(out)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and f"{out}/hops4_scalar: No such file" in res.stderr
    res = subprocess.run([str(exe), str(slice_file), "4", str(a4), str(a4), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and (tmp_path / "hops4_batch").stat().st_size == 2 * 64


# ---- the reference ---------------------------------------------------------------------


def test_next_hop_rule_matches_the_documented_values() -> None:
    # The same values runtime/lib/lpm/tests/test_lpm.c pins for the C rule.
    net = ipaddress.ip_network
    assert next_hop(net("1.0.0.0/24")) == 5 and next_hop(net("1.0.0.0/24"), 1000) == 877
    assert next_hop(net("0.0.0.0/0")) == 16 and next_hop(net("0.0.0.0/0"), 1000) == 728
    assert next_hop(net("255.255.255.255/32"), 1000) == 380
    assert next_hop(net("2001:db8::/32")) == 6 and next_hop(net("2001:db8::/32"), 1000) == 638
    assert next_hop(net("::/0"), 1000) == 336
    assert next_hop(net("2001:4:112::/48"), 1000) == 720


def test_reference_takes_the_longest_prefix_and_the_last_duplicate() -> None:
    net = ipaddress.ip_network
    ref = Reference([(net("10.0.0.0/8"), 1), (net("10.1.0.0/16"), 2), (net("10.1.2.3/32"), 3),
                     (net("10.1.0.0/16"), 4), (net("2001:db8::/32"), 5),
                     (net("2001:db8::1/128"), 6), (net("::/0"), 7)])
    a = ipaddress.ip_address
    assert [ref.lookup(a(x)) for x in ("10.1.2.3", "10.1.2.4", "10.2.0.0", "11.0.0.0")] == \
        [3, 4, 1, 0]
    assert [ref.lookup(a(x)) for x in ("2001:db8::1", "2001:db8::2", "2001:db9::")] == \
        [6, 5, 7]


def test_reference_numpy_search_equals_the_dict_loop() -> None:
    rng = random.Random(9)
    nets = [ipaddress.ip_network((rng.getrandbits(32), rng.randint(0, 32)), strict=False)
            for _ in range(300)]
    nets += [ipaddress.ip_network(((0x20 << 120) | rng.getrandbits(120), rng.randint(0, 128)),
                                  strict=False) for _ in range(300)]
    ref = Reference.from_networks(nets)
    gen = np.random.default_rng(1)
    hi = np.array([int(n.network_address) >> 64 for n in nets if n.version == 6], np.uint64)
    lo = np.array([int(n.network_address) & (2**64 - 1) for n in nets if n.version == 6],
                  np.uint64)
    ln = np.array([n.prefixlen for n in nets if n.version == 6], np.uint8)
    a6, _ = check.addresses6(hi, lo, ln, 2000, gen)
    got6 = ref.lookup6_many(a6)
    assert [int(g) for g in got6] == [ref.lookup(ipaddress.IPv6Address(bytes(x))) for x in a6]
    addr = np.array([int(n.network_address) for n in nets if n.version == 4], np.uint32)
    ln4 = np.array([n.prefixlen for n in nets if n.version == 4], np.uint8)
    a4, _ = check.addresses4(addr, ln4, 2000, gen)
    got4 = ref.lookup4_many(a4)
    assert [int(g) for g in got4] == [ref.lookup(ipaddress.IPv4Address(int(x))) for x in a4]
    assert (got4 > 0).any() and (got6 > 0).any()


def test_reference_reads_prefix_files_like_the_c_reader(tmp_path: Path) -> None:
    assert parse_line("  8.8.8.8") == ipaddress.ip_network("8.8.8.8/32")
    assert parse_line("10.1.2.3/8|x") == ipaddress.ip_network("10.0.0.0/8")
    assert parse_line("2001:db8::1/32;x") == ipaddress.ip_network("2001:db8::/32")
    assert parse_line("2001:db8::1") is False      # IPv6 needs its length
    assert parse_line("# c") is None and parse_line("\r") is None
    assert parse_line("1::2::3/64") is False and parse_line("x" * 300) is False
    p = tmp_path / "p.txt.gz"
    p.write_bytes(gzip.compress(b"1.0.0.0/24\r\n2001:db8::/32\r\nbad\n\n::/0"))
    nets, bad = read_prefixes(p)
    assert [str(n) for n in nets] == ["1.0.0.0/24", "2001:db8::/32", "::/0"] and bad == 1
