"""Independent references for the crypto elements, built on hashlib: the active-NIC
seed's MD5 over K interleaved chains (runtime/lib/crypto/include/offlow/md5x.h states
the scheme)."""

from __future__ import annotations

import hashlib

BLOCK = 64


def md5_chain_digests(msg: bytes, k: int) -> list[bytes]:
    """The K chain digests: block i (64 bytes, the last may be shorter) goes to chain
    i mod K; each chain is the MD5 of its blocks in order."""
    if k < 1:
        raise ValueError("k must be at least 1")
    blocks = [msg[i:i + BLOCK] for i in range(0, len(msg), BLOCK)]
    return [hashlib.md5(b"".join(blocks[j::k])).digest() for j in range(k)]


def md5_chains(msg: bytes, k: int) -> bytes:
    """The chained digest: the MD5 of the K chain digests concatenated."""
    return hashlib.md5(b"".join(md5_chain_digests(msg, k))).digest()
