"""The crypto elements in programs, end to end through `offlow run`'s machinery: every
output datagram checked against an independent peer on the same keys, IVs and data
(hashlib and the hashlib-built chain reference, `cryptography` for AES, `pycryptodome`
for Blowfish), in input order, with their IPv4/UDP headers made consistent; bad
ciphertexts, unknown flows and other protocols counted per reason and never sent on."""

from __future__ import annotations

import hashlib
import random
import struct
from pathlib import Path

import dpkt
import pytest
from Crypto.Cipher import Blowfish
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from offlow import Program, Sink, Source
from offlow.crypto.keys import FlowKey, key_table_text
from offlow.crypto.reference import md5_chains
from offlow.dsl.loader import load_program
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.crypto import CbcDecrypt, CbcEncrypt, Md5, Md5Chains, cbc_keys
from offlow.errors import OfflowError
from offlow.report import summarize
from offlow.runner import RunOptions, build_for, run
from tests.e2e import ROOT, read_frames

SEALED = ROOT / "tests" / "programs" / "sealed.py"
MAC = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"


def udp_frame(src: str, sport: int, dst: str, dport: int, payload: bytes,
              proto: int = 17) -> bytes:
    """An Ethernet/IPv4/UDP frame made by dpkt (a TCP segment when proto is 6)."""
    l4 = (dpkt.udp.UDP(sport=sport, dport=dport, ulen=8 + len(payload), data=payload)
          if proto == 17 else dpkt.tcp.TCP(sport=sport, dport=dport, data=payload))
    ip = dpkt.ip.IP(src=bytes(map(int, src.split("."))), dst=bytes(map(int, dst.split("."))),
                    p=proto, ttl=64, data=l4)
    ip.len = 20 + len(bytes(l4))
    return bytes(dpkt.ethernet.Ethernet(dst=MAC[:6], src=MAC[6:], type=0x0800, data=ip))


def write_pcap(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=65535)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=1.0 + i * 1e-6)


def payloads(frames: list[bytes]) -> list[bytes]:
    """The UDP payloads of `frames`, each frame's headers checked: IPv4 total length and
    UDP length match the payload, the IPv4 checksum is right, no bytes follow."""
    out = []
    for fr in frames:
        ip = dpkt.ethernet.Ethernet(fr).data
        assert isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.udp.UDP)
        hdr = fr[14:14 + ip.hl * 4]
        assert sum(struct.unpack(f"!{len(hdr) // 2}H", hdr)) % 0xFFFF == 0
        assert ip.len == len(fr) - 14 and ip.data.ulen == ip.len - ip.hl * 4
        out.append(bytes(ip.data.data))
    return out


def run_program(prog: Program, frames: list[bytes], tmp: Path,
                opts: tuple[str, ...] = ()) -> tuple[dict, list[bytes]]:
    inp, out = tmp / "in.pcap", tmp / "out.pcap"
    write_pcap(inp, frames)
    o = RunOptions(input=inp, output=out, opts=opts, timeout=120)
    b = build_for(prog, o, werror=True)
    res = run(b, o)
    s = summarize(b.plan, res.stats)
    assert res.ok, res.errors
    return s, read_frames(out) if out.exists() else []


def dropped(s: dict) -> dict[tuple[str, str], int]:
    return {(d["at"], d["reason"]): d["packets"] for d in s["accounting"]["dropped"]}


def one_element(element, device: str, cores: int = 1) -> Program:
    """Source -> parsers -> `element` -> sink, the element on `device`."""
    p = Program(f"one_{element.name}")
    src, eth, ip4, l4, out, junk = (Source("src"), ParseEth("eth"), CheckIPv4("ip4"),
                                    ParseL4("l4"), Sink("sink"), Discard("junk"))
    src >> eth
    eth["ipv4"] >> ip4 >> l4 >> element >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("rx", [src, eth, ip4, l4, junk], device="host")
    p.segment("work", [element], device=device, cores=range(cores), group=cores > 1)
    p.segment("tx", [out], device="host", cores=[1])
    return p


SIZES = [0, 1, 15, 16, 17, 55, 56, 63, 64, 65, 127, 128, 129, 191, 200, 255, 256, 257, 511,
         777, 1023, 1024, 1400, 1471]


def random_datagrams(seed: int, flows: list[tuple[str, int, str, int]]) -> list[tuple[int, bytes]]:
    rnd = random.Random(seed)
    return [(i % len(flows), rnd.randbytes(n)) for i, n in enumerate(SIZES * 2)]


FLOWS = [("10.1.0.1", 4000, "10.2.0.2", 5000), ("10.1.0.9", 4001, "10.2.0.2", 5000),
         ("192.0.2.1", 53, "198.51.100.7", 53)]


@pytest.mark.parametrize("device", ["host", "nic"])
def test_md5_elements_match_hashlib_and_the_chain_reference(device: str, tmp_path: Path) -> None:
    data = random_datagrams(1, FLOWS)
    frames = [udp_frame(*FLOWS[f], pl) for f, pl in data]
    frames.insert(3, udp_frame(*FLOWS[0], b"tcp, not udp", proto=6))
    s, out = run_program(one_element(Md5Chains("chains5", k=5), device), frames, tmp_path)
    assert payloads(out) == [md5_chains(pl, 5) for _, pl in data]
    assert dropped(s) == {("chains5", "not_udp"): 1}
    s, out = run_program(one_element(Md5("plain"), device), frames, tmp_path)
    assert payloads(out) == [hashlib.md5(pl).digest() for _, pl in data]


def test_md5_chains_k_out_of_range_is_refused_at_construction() -> None:
    for k in (0, 17):
        with pytest.raises(OfflowError, match="the number of chains must be 1..16"):
            Md5Chains("c", k=k)


def _keys(rnd: random.Random, keylen: int, ivlen: int) -> list[FlowKey]:
    return [FlowKey(a, sp, b, dp, rnd.randbytes(keylen), rnd.randbytes(ivlen))
            for a, sp, b, dp in FLOWS]


def _aes(k: FlowKey, data: bytes) -> bytes:
    pad = padding.PKCS7(128).padder()
    enc = Cipher(algorithms.AES(k.key), modes.CBC(k.iv)).encryptor()
    return enc.update(pad.update(data) + pad.finalize()) + enc.finalize()


@pytest.mark.parametrize("cipher,device", [("aes-128-cbc", "host"), ("aes-128-cbc", "nic"),
                                           ("bf-cbc", "nic")])
def test_encryption_matches_the_peer(cipher: str, device: str, tmp_path: Path) -> None:
    aes = cipher == "aes-128-cbc"
    keys = _keys(random.Random(2), 16, 16 if aes else 8)
    (tmp_path / "k.txt").write_text(key_table_text(keys[:2], "the third flow has no key"))
    data = random_datagrams(3, FLOWS)
    frames = [udp_frame(*FLOWS[f], pl) for f, pl in data]
    prog = one_element(CbcEncrypt("seal", keys=cbc_keys("k", tmp_path / "k.txt", cipher)),
                       device)
    s, out = run_program(prog, frames, tmp_path)
    ref = _aes if aes else _bf
    assert payloads(out) == [ref(keys[f], pl) for f, pl in data if f < 2]
    assert dropped(s) == {("seal", "no_key"): sum(f == 2 for f, _ in data)}


def test_a_ciphertext_longer_than_the_mtu_is_dropped_not_cut(tmp_path: Path) -> None:
    keys = _keys(random.Random(8), 16, 16)
    (tmp_path / "k.txt").write_text(key_table_text(keys))
    sizes = [1472, 1456, 1455, 100]  # frames of 1514, 1498, 1497, 142 bytes
    frames = [udp_frame(*FLOWS[0], bytes(n)) for n in sizes]
    prog = one_element(CbcEncrypt("seal", keys=cbc_keys("k", tmp_path / "k.txt")), "nic")
    prog.apply_setting("mtu=1514")
    s, out = run_program(prog, frames, tmp_path)
    # 1472 and 1456 bytes pad to 1488 and 1472 (frames of 1530 and 1514): only the
    # first is over
    assert payloads(out) == [_aes(keys[0], bytes(n)) for n in sizes[1:]]
    assert dropped(s) == {("seal", "too_long"): 1}


def test_aes_round_trip_on_two_devices_gives_the_datagrams_back(tmp_path: Path) -> None:
    keys = _keys(random.Random(4), 16, 16)
    (tmp_path / "k.txt").write_text(key_table_text(keys))
    data = random_datagrams(5, FLOWS)
    p = Program("round_trip")
    src, eth, ip4, l4, out, junk = (Source("src"), ParseEth("eth"), CheckIPv4("ip4"),
                                    ParseL4("l4"), Sink("sink"), Discard("junk"))
    enc = CbcEncrypt("enc", keys=cbc_keys("knic", tmp_path / "k.txt"))
    dec = CbcDecrypt("dec", keys=cbc_keys("khost", tmp_path / "k.txt"))
    src >> eth
    eth["ipv4"] >> ip4 >> l4 >> enc >> dec >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("nic", [src, eth, ip4, l4, junk, enc], device="nic")
    p.segment("host", [dec, out], device="host")
    s, got = run_program(p, [udp_frame(*FLOWS[f], pl) for f, pl in data], tmp_path)
    assert payloads(got) == [pl for _, pl in data]
    assert s["accounting"]["dropped"] == []


def _bf(k: FlowKey, data: bytes, pad: bool = True) -> bytes:
    n = 8 - len(data) % 8
    return Blowfish.new(k.key, Blowfish.MODE_CBC, iv=k.iv).encrypt(
        data + bytes([n]) * n if pad else data)


def sealed_input(rnd: random.Random, keys: list[FlowKey], n: int = 300
                 ) -> tuple[list[bytes], list[bytes], dict[str, int]]:
    """Frames for tests/programs/sealed.py: Blowfish ciphertexts of two flows in the key
    table, some cut short, some with a bad pad, some of a flow not in it, some TCP; the
    payloads it must send on (digest + plaintext) and the drops per reason."""
    frames, want, bad = [], [], {"not_blocks": 0, "bad_padding": 0, "no_key": 0, "not_udp": 0}
    for i in range(n):
        f = i % 2
        pl = rnd.randbytes(rnd.choice([0, 1, 7, 8, 9, 100, 333, 1000, rnd.randrange(1200)]))
        kind = rnd.random()
        if kind < 0.06:
            frames.append(udp_frame(*FLOWS[f], _bf(keys[f], pl)[:-rnd.randrange(1, 8)] or b"x"))
            bad["not_blocks"] += 1
        elif kind < 0.12:  # whole blocks whose last byte decrypts to 0 or 9..255
            last = rnd.choice([0, *range(9, 256)])
            whole = pl[: len(pl) // 8 * 8] + b"\0" * 7 + bytes([last])
            frames.append(udp_frame(*FLOWS[f], _bf(keys[f], whole, pad=False)))
            bad["bad_padding"] += 1
        elif kind < 0.15:
            frames.append(udp_frame(*FLOWS[2], _bf(keys[2], pl)))
            bad["no_key"] += 1
        elif kind < 0.17:
            frames.append(udp_frame(*FLOWS[f], pl, proto=6))
            bad["not_udp"] += 1
        else:
            frames.append(udp_frame(*FLOWS[f], _bf(keys[f], pl)))
            want.append(md5_chains(pl, 3) + pl)
    return frames, want, bad


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_blowfish_on_a_core_group_keeps_order_and_counts_bad_ciphertexts(
        cores: int, tmp_path: Path) -> None:
    """tests/programs/sealed.py: Blowfish-CBC decryption on a NIC core group, then a
    user's element stamps the 3-chain digest in front of each plaintext."""
    rnd = random.Random(6)
    keys = _keys(rnd, 24, 8)
    (tmp_path / "vault.txt").write_text(key_table_text(keys[:2]))
    frames, want, bad = sealed_input(rnd, keys)
    # an ordered group of one core too (its worker code was emitted unused: -Werror failed)
    prog = load_program(SEALED, [f"open.cores={','.join(str(1 + c) for c in range(cores))}",
                                 "open.ordered=on"])
    s, out = run_program(prog, frames, tmp_path, opts=(f"vault.path={tmp_path / 'vault.txt'}",))
    assert payloads(out) == want
    assert dropped(s) == {("opener", k): v for k, v in bad.items() if v}


def test_crypto_program_is_clean_under_asan_and_ubsan(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """sealed.py on an ordered group of two NIC cores, runtime and generated code built
    with the sanitizers, on the malformed capture's frames mixed into its ciphertexts:
    any out-of-bounds access, undefined behaviour or leak fails a process."""
    from offlow.build import build
    from offlow.cbuild import flags
    from offlow.testing.malformed import write_malformed_pcap

    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    monkeypatch.setenv("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    rnd = random.Random(11)
    keys = _keys(rnd, 16, 8)
    (tmp_path / "vault.txt").write_text(key_table_text(keys[:2]))
    frames, want, _ = sealed_input(rnd, keys, 120)
    write_malformed_pcap(tmp_path / "bad.pcap")
    mixed = [f for pair in zip(frames, read_frames(tmp_path / "bad.pcap") * 3, strict=False)
             for f in pair] + frames[len(read_frames(tmp_path / "bad.pcap")) * 3:]
    inp, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    write_pcap(inp, mixed)
    b = build(load_program(SEALED, ["open.cores=1,2", "open.ordered=on"]), werror=True,
              extra_flags=flags("sanitize"))
    res = run(b, RunOptions(input=inp, output=out, timeout=300,
                            opts=(f"vault.path={tmp_path / 'vault.txt'}",)))
    assert res.ok, res.errors
    assert payloads(read_frames(out)) == want


def test_the_example_seals_the_listed_quic_flows_like_cryptography(tmp_path: Path) -> None:
    """examples/crypto.py on quic.pcap: every datagram of a flow in crypto_keys.txt
    comes out encrypted as `cryptography` encrypts it, in input order; the rest is
    counted."""
    from tests.e2e import QUIC, run_example

    keys = {}
    for line in (ROOT / "examples" / "crypto_keys.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            src, dst, key, iv = line.split()
            (a, sp), (b, dp) = src.split(":"), dst.split(":")
            keys[a, int(sp), b, int(dp)] = FlowKey(a, int(sp), b, int(dp), bytes.fromhex(key),
                                                   bytes.fromhex(iv))
    want, other = [], 0
    for fr in read_frames(QUIC):
        ip = dpkt.ethernet.Ethernet(fr).data
        flow = None
        if isinstance(ip, dpkt.ip.IP) and isinstance(ip.data, dpkt.udp.UDP):
            flow = (dpkt.utils.inet_to_str(ip.src), ip.data.sport,
                    dpkt.utils.inet_to_str(ip.dst), ip.data.dport)
        if flow in keys:
            want.append(_aes(keys[flow], bytes(ip.data.data)))
        else:
            other += 1
    out = tmp_path / "sealed.pcap"
    s = run_example(program=ROOT / "examples" / "crypto.py", input=QUIC, output=out)
    assert s["ok"], s["errors"]
    assert len(want) > 30 and payloads(read_frames(out)) == want
    assert sum(dropped(s).values()) == other


def test_explain_says_an_ordered_group_keeps_input_order() -> None:
    from offlow.build import build
    from offlow.dsl.loader import load_program
    from offlow.explain import explain

    text = explain(build(load_program(ROOT / "examples" / "crypto.py")).plan)
    seal = next(line for line in text.splitlines() if line.strip().startswith("seal:"))
    assert "core group of 2" in seal and "outputs on in input order" in seal
    text = explain(build(load_program(ROOT / "examples" / "crypto.py",
                                      ["seal.ordered=off"])).plan)
    seal = next(line for line in text.splitlines() if line.strip().startswith("seal:"))
    assert "core group of 2" in seal and "input order" not in seal


@pytest.mark.parametrize("text,opt,why", [
    ("10.0.0.1:1 10.0.0.2:2 00\n", (), "k.txt: line 1: the key must be 32 hex digits"),
    ("# fine\n" + FlowKey("10.0.0.1", 1, "10.0.0.2", 2, bytes(16), bytes(16)).line(),
     ("k.cipher=bf-cbc",), "k.txt: line 2: the IV must be 16 hex digits"),
    ("", ("k.cipher=des",), "cipher=des: expected aes-128-cbc or bf-cbc"),
])
def test_a_bad_key_table_is_one_error_before_any_process_starts(
        text: str, opt: tuple[str, ...], why: str, tmp_path: Path) -> None:
    (tmp_path / "k.txt").write_text(text)
    inp = tmp_path / "in.pcap"
    write_pcap(inp, [udp_frame(*FLOWS[0], b"x")])
    o = RunOptions(input=inp, opts=opt, timeout=60)
    b = build_for(one_element(CbcDecrypt("open", keys=cbc_keys("k", tmp_path / "k.txt")),
                              "nic"), o)
    with pytest.raises(OfflowError, match=f"key table `k`: .*{why}"):
        run(b, o)
