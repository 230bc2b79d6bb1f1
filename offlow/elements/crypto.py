"""Partitioned crypto (the active-NIC seed and Floem's AES application): MD5 of each
datagram, the seed's MD5 over K interleaved chains, and CBC encryption and decryption per
flow (AES-128, Blowfish) with keys from a table the user writes
(runtime/lib/crypto/include/offlow/md5x.h, cbc.h).

Each element works on the UDP payload of an IPv4 datagram (CheckIPv4 and ParseL4 before
it) and rewrites it whole: the digest, the ciphertext or the plaintext becomes the
payload, with the IPv4 and UDP lengths, the IPv4 checksum, a UDP checksum of 0 (none) and
the state's l4_end set to match. Any placement works; a segment on several cores runs
them data-parallel, and an ordered core group (`ordered=True`) keeps its output in input
order."""

from __future__ import annotations

from pathlib import Path

from offlow.crypto.clib import CIPHERS
from offlow.dsl import Element, Port, Table
from offlow.elements.udp4 import UDP4_INCLUDE, UDP_DROPS, UDP_PAYLOAD
from offlow.errors import OfflowError

MD5X_MAX_K = 16  # md5x.h's OFL_MD5X_MAX_K (tests/test_crypto_lib.py checks they agree)

_INCLUDES = ("offlow/md5x.h", "offlow/cbc.h", UDP4_INCLUDE)


def cbc_keys(name: str, path: str | Path | None = None, cipher: str = "aes-128-cbc") -> Table:
    """A key table for CbcEncrypt / CbcDecrypt: one flow per line, `SRC:SPORT DST:DPORT
    KEY IV` in hex (cbc.h); run-time options NAME.path= and NAME.cipher=aes-128-cbc|bf-cbc.
    It is read by the device whose segment uses it."""
    if cipher not in CIPHERS:
        raise OfflowError(f"key table `{name}`: cipher {cipher!r}: expected one of "
                          + ", ".join(CIPHERS))
    opts = (("cipher", cipher),) + ((("path", str(path)),) if path else ())
    return Table(name, "struct ofl_cbc_table", "ofl_cbc_table_open_opts", "ofl_cbc_table_close",
                 options=opts, source="a key table (cbc.c): key and IV per IPv4/UDP flow, "
                                      "read from its file (path=)",
                 includes=("offlow/cbc.h",), check="offlow.crypto.clib:check_key_table",
                 keys=("cipher", "path"))


class Md5(Element):
    """The UDP payload becomes its MD5 digest (16 bytes)."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    includes = _INCLUDES
    drops = {**UDP_DROPS, "too_long": "no room for a 16-byte digest (a payload under 16 "
                                       "bytes in a frame of the program's mtu)"}
    body = UDP_PAYLOAD + r"""
    if (ofl_udp4_room(pkt, state->l3_off, off, OFL_MTU) < OFL_MD5_LEN)
        DROP_WHY(too_long);
    uint8_t digest[OFL_MD5_LEN];
    ofl_md5(pkt->data + off, len, digest);
    memcpy(pkt->data + off, digest, sizeof digest);
    ofl_udp4_set_payload_len(pkt, state->l3_off, state->l4_off, OFL_MD5_LEN);
    state->l4_end = (uint16_t)pkt->len;  /* the IP packet ends with the new payload */
    """


class Md5Chains(Element):
    """The UDP payload becomes its digest by the active-NIC seed's MD5 over `k`
    interleaved chains (md5x.h: 64-byte block i to chain i mod k, then the MD5 of the k
    chain digests); the chains run interleaved on the core. k = 1..16."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    params = {"k": "uint32_t"}
    includes = _INCLUDES
    drops = Md5.drops
    body = UDP_PAYLOAD + r"""
    if (ofl_udp4_room(pkt, state->l3_off, off, OFL_MTU) < OFL_MD5_LEN)
        DROP_WHY(too_long);
    uint8_t digest[OFL_MD5_LEN];
    ofl_md5_chains(pkt->data + off, len, k, digest);
    memcpy(pkt->data + off, digest, sizeof digest);
    ofl_udp4_set_payload_len(pkt, state->l3_off, state->l4_off, OFL_MD5_LEN);
    state->l4_end = (uint16_t)pkt->len;  /* the IP packet ends with the new payload */
    """

    def __init__(self, name: str | None = None, k: int = 4) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MD5X_MAX_K:
            raise OfflowError(f"element `{name or 'md5chains'}`: k={k!r}: the number of "
                              f"chains must be 1..{MD5X_MAX_K}")
        super().__init__(name, k=k)


_KEY_DROPS = {**UDP_DROPS, "no_key": "the flow (addresses and ports) is not in the key table",
              "cipher": "OpenSSL refused, or no memory for a cipher context"}
_FLOW = r"""
    struct ofl_cbc_flow *flow = ofl_cbc_find(keys, state->src4, state->dst4, state->sport,
                                             state->dport);
    if (!flow)
        DROP_WHY(no_key);
"""


class CbcEncrypt(Element):
    """Encrypts the UDP payload in CBC mode with its flow's key and IV from `keys`
    (cbc_keys: AES-128 or Blowfish), PKCS#7-padded to whole blocks (1..block bytes
    added)."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    tables = ("keys",)
    includes = _INCLUDES
    drops = {**_KEY_DROPS, "too_long": "the padded ciphertext does not fit the program's mtu "
                                       "(or an IPv4 packet)"}
    body = UDP_PAYLOAD + _FLOW + r"""
    long n = ofl_cbc_encrypt(keys, flow, pkt->data + off, len, pkt->data + off,
                             ofl_udp4_room(pkt, state->l3_off, off, OFL_MTU));
    if (n == OFL_CBC_ESPACE)
        DROP_WHY(too_long);
    if (n < 0)
        DROP_WHY(cipher);
    ofl_udp4_set_payload_len(pkt, state->l3_off, state->l4_off, (uint32_t)n);
    state->l4_end = (uint16_t)pkt->len;
    """


class CbcDecrypt(Element):
    """Decrypts the UDP payload in CBC mode with its flow's key and IV from `keys` and
    removes the PKCS#7 padding; a payload that is not whole blocks, or whose padding is
    wrong, is dropped (counted per reason), never passed on."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    tables = ("keys",)
    includes = _INCLUDES
    drops = {**_KEY_DROPS,
             "not_blocks": "the payload is empty or not a whole number of cipher blocks",
             "bad_padding": "the decrypted padding is not PKCS#7's (wrong key or IV, or "
                            "damaged data)"}
    body = UDP_PAYLOAD + _FLOW + r"""
    long n = ofl_cbc_decrypt(keys, flow, pkt->data + off, len, pkt->data + off);
    if (n == OFL_CBC_EBLOCKS)
        DROP_WHY(not_blocks);
    if (n == OFL_CBC_EPADDING)
        DROP_WHY(bad_padding);
    if (n < 0)
        DROP_WHY(cipher);
    ofl_udp4_set_payload_len(pkt, state->l3_off, state->l4_off, (uint32_t)n);
    state->l4_end = (uint16_t)pkt->len;
    """
