"""runtime/lib/crypto from Python (ctypes): MD5 and the seed's MD5 over K interleaved
chains against hashlib and the hashlib-built reference (offlow.crypto.reference),
AES-128-CBC against `cryptography` and Blowfish-CBC against `pycryptodome`, on random
data of every small length and odd large ones, with PKCS#7 padding; bad paddings and
lengths that are not whole blocks refused, never returned as plaintext."""

from __future__ import annotations

import ctypes
import hashlib
import random

import pytest
from Crypto.Cipher import Blowfish
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from offlow.crypto.clib import KeyTable as Table
from offlow.crypto.clib import lib
from offlow.crypto.keys import FlowKey, key_table_text
from offlow.crypto.reference import md5_chains
from offlow.elements.crypto import MD5X_MAX_K

AES, BF = "aes-128-cbc", "bf-cbc"
ESPACE, EBLOCKS, EPADDING = -1001, -1002, -1003
LENGTHS = [*range(0, 200), 255, 256, 257, 1023, 1471, 1500, 4095, 9001]


def test_md5_matches_hashlib_on_random_data_of_many_lengths() -> None:
    rnd = random.Random(5)
    for n in LENGTHS:
        msg = rnd.randbytes(n)
        out = ctypes.create_string_buffer(16)
        lib().ofl_md5(msg, n, out)
        assert out.raw == hashlib.md5(msg).digest(), n


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8, 13, 16])
def test_md5_chains_match_the_hashlib_reference(k: int) -> None:
    rnd = random.Random(k)
    for n in LENGTHS:
        msg = rnd.randbytes(n)
        out = ctypes.create_string_buffer(16)
        assert lib().ofl_md5_chains(msg, n, k, out) == 0
        assert out.raw == md5_chains(msg, k), (n, k)


def test_md5_chains_refuse_k_0_and_over_the_most_the_element_takes() -> None:
    out = ctypes.create_string_buffer(b"\xaa" * 16, 16)
    for k in (0, MD5X_MAX_K + 1):
        assert lib().ofl_md5_chains(b"abc", 3, k, out) == -22
    assert out.raw == b"\xaa" * 16
    assert lib().ofl_md5_chains(b"abc", 3, MD5X_MAX_K, out) == 0


def _flows(rnd: random.Random, keylen: int, ivlen: int, n: int) -> list[FlowKey]:
    return [FlowKey(f"10.{i // 256}.{i % 256}.1", 1000 + i, "192.168.7.9", 443 + i,
                    rnd.randbytes(keylen), rnd.randbytes(ivlen)) for i in range(n)]


def _ip(s: str) -> int:
    a, b, c, d = (int(x) for x in s.split("."))
    return a << 24 | b << 16 | c << 8 | d


def _aes_ref(f: FlowKey, data: bytes) -> bytes:
    pad = padding.PKCS7(128).padder()
    enc = Cipher(algorithms.AES(f.key), modes.CBC(f.iv)).encryptor()
    return enc.update(pad.update(data) + pad.finalize()) + enc.finalize()


def _bf_ref(f: FlowKey, data: bytes) -> bytes:
    pad = 8 - len(data) % 8
    return Blowfish.new(f.key, Blowfish.MODE_CBC, iv=f.iv).encrypt(data + bytes([pad]) * pad)


@pytest.mark.parametrize("cipher,keylen,ivlen,ref", [(AES, 16, 16, _aes_ref),
                                                     (BF, 4, 8, _bf_ref), (BF, 16, 8, _bf_ref),
                                                     (BF, 56, 8, _bf_ref)],
                         ids=["aes128", "bf32", "bf128", "bf448"])
def test_cbc_is_bit_exact_with_the_peer_both_ways(cipher: str, keylen: int, ivlen: int,
                                                  ref) -> None:
    rnd = random.Random(keylen)
    flows = _flows(rnd, keylen, ivlen, 5)
    t = Table(key_table_text(flows, "keys made by the test"), cipher)
    assert t.rc == 0, t.error
    try:
        for n in LENGTHS:
            f = flows[n % len(flows)]
            h = t.flow(_ip(f.src), _ip(f.dst), f.sport, f.dport)
            assert h
            data = rnd.randbytes(n)
            ct = t.encrypt(h, data)
            assert ct == ref(f, data), n
            assert t.decrypt(h, ct) == data, n
    finally:
        t.close()


@pytest.mark.parametrize("cipher,block", [(AES, 16), (BF, 8)], ids=["aes128", "bf"])
def test_bad_padding_and_partial_blocks_are_refused(cipher: str, block: int) -> None:
    rnd = random.Random(block)
    f = _flows(rnd, 16, block, 1)[0]
    t = Table(key_table_text([f]), cipher)
    assert t.rc == 0, t.error
    try:
        h = t.flow(_ip(f.src), _ip(f.dst), f.sport, f.dport)
        good = t.encrypt(h, b"x" * 37)
        assert isinstance(good, bytes)
        for n in (0, 1, block - 1, block + 1, len(good) - 1):
            assert t.decrypt(h, good[:n]) == EBLOCKS, n
        # a ciphertext whose last block decrypts to a wrong pad: flip bits of the block
        # before it (CBC: the same bits of the last plaintext block flip)
        bad = 0
        for flip in range(1, 256):
            ct = bytearray(good)
            ct[-block - 1] ^= flip
            pt = t.decrypt(h, bytes(ct))
            last = (b"x" * 37 + bytes([block - 37 % block]) * (block - 37 % block))[-1] ^ flip
            if not 1 <= last <= block:
                assert pt == EPADDING, flip
                bad += 1
        assert bad > 200
        assert t.encrypt(h, b"y" * 40, cap=40) == ESPACE
    finally:
        t.close()


def test_lookup_finds_each_flow_and_only_it() -> None:
    rnd = random.Random(9)
    flows = _flows(rnd, 16, 16, 300)
    t = Table(key_table_text(flows), AES)
    assert t.rc == 0, t.error
    try:
        for f in flows:
            assert t.flow(_ip(f.src), _ip(f.dst), f.sport, f.dport)
            assert not t.flow(_ip(f.src), _ip(f.dst), f.dport, f.sport)
    finally:
        t.close()


@pytest.mark.parametrize("text,cipher,why", [
    ("10.0.0.1 10.0.0.2:2 " + "00" * 16 + " " + "00" * 16, AES, "line 1: expected SRC:PORT"),
    ("# c\n10.0.0.1:1 10.0.0.2:2 " + "00" * 15 + " " + "00" * 16, AES,
     "line 2: the key must be 32 hex digits"),
    ("10.0.0.1:1 10.0.0.2:2 " + "00" * 16 + " " + "0g" * 16, AES, "line 1: the IV must be 32"),
    ("10.0.0.1:1 10.0.0.2:70000 " + "00" * 16 + " " + "00" * 16, AES,
     "line 1: expected DST:PORT"),
    ("1.2.3:1 10.0.0.2:2 " + "00" * 16 + " " + "00" * 16, AES, "line 1: expected SRC:PORT"),
    ("10.0.0.1:1 10.0.0.2:2 " + "00" * 3 + " " + "00" * 8, BF,
     "line 1: the key must be 8..112 hex digits"),
    ("10.0.0.1:1 10.0.0.2:2 " + "00" * 8 + " " + "00" * 8 + " extra", BF,
     "line 1: unexpected text after the IV"),
    ("10.0.0.1:1 10.0.0.2:2 " + "00" * 8 + " " + "00" * 8 + "\n"
     "10.0.0.1:1 10.0.0.2:2 " + "11" * 8 + " " + "00" * 8, BF,
     "line 2: flow 10.0.0.1:1 10.0.0.2:2 is listed twice (first on line 1)"),
])
def test_key_table_errors_name_the_line_and_the_reason(text: str, cipher: str, why: str) -> None:
    t = Table(text, cipher)
    assert t.rc == -22
    assert t.error.startswith(why), t.error


def test_key_table_takes_comments_blank_lines_and_crlf() -> None:
    text = ("# flows of the test\r\n\r\n  10.0.0.1:1\t10.0.0.2:2 " + "ab" * 16 + " "
            + "cd" * 16 + "   # the first\r\n")
    t = Table(text, AES)
    assert t.rc == 0, t.error
    try:
        assert t.flow(0x0A000001, 0x0A000002, 1, 2)
    finally:
        t.close()


@pytest.mark.parametrize("last,plain", [
    (b"\x03\x03\x03", b"z" * 13), (b"\x01\x03\x03", None), (b"\x03\x02\x03", None),
    (b"zz\x00", None), (b"zz\x11", None), (b"\x10" * 3, None)])
def test_every_pad_byte_is_checked(last: bytes, plain: bytes | None) -> None:
    """Ciphertexts made by `cryptography` without padding, whose last block ends in
    `last`: only a whole PKCS#7 pad decrypts."""
    f = FlowKey("10.0.0.1", 1, "10.0.0.2", 2, bytes(range(16)), bytes(range(16, 32)))
    t = Table(key_table_text([f]), AES)
    assert t.rc == 0, t.error
    try:
        h = t.flow(0x0A000001, 0x0A000002, 1, 2)
        data = b"z" * 13 + last
        enc = Cipher(algorithms.AES(f.key), modes.CBC(f.iv)).encryptor()
        got = t.decrypt(h, enc.update(data) + enc.finalize())
        assert got == (plain if plain is not None else EPADDING)
    finally:
        t.close()
