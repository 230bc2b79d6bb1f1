"""Partitioned crypto on the NIC: Floem's AES-CBC-128 per flow, on an ordered core group.

The NIC parses each frame on core 0 and encrypts the UDP payload of every datagram of the
flows listed in crypto_keys.txt (key and IV per flow) on cores 1 and 2, a core group
that keeps the datagrams in their input order (the active-NIC seed's partitioning of one
stream over device cores); the host sends them on. Datagrams of other flows are dropped
and counted (`no_key`), and so is what is not UDP over IPv4 (`not_udp`).

    offlow run examples/crypto.py --input $OFFLOW_DATA/quic.pcap --output sealed.pcap

`--opt keys.path=FILE` reads another key table; `--set seal.cores=1` runs the encryption
on one core, `--set seal.device=host` on the host (docs/crypto.md: the key table,
Blowfish, MD5 over K interleaved chains, `offlow bench crypto`)."""

from pathlib import Path

from offlow import Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.crypto import CbcEncrypt, cbc_keys


def program() -> Program:
    p = Program("crypto")
    keys = cbc_keys("keys", Path(__file__).with_name("crypto_keys.txt"), cipher="aes-128-cbc")
    rx, eth, ip4, ports = Source("rx"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("ports")
    seal, tx, other = CbcEncrypt("seal", keys=keys), Sink("tx"), Discard("other")
    rx >> eth
    eth["ipv4"] >> ip4 >> ports >> seal >> tx
    eth["ipv6"] >> other
    eth["other"] >> other
    p.segment("rx", [rx, eth, ip4, ports, other], device="nic", cores=[0])
    p.segment("seal", [seal], device="nic", cores=[1, 2], ordered=True)
    p.segment("tx", [tx], device="host")
    return p
