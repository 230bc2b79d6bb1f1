"""A user's encrypt-then-segment pipeline, first half (docs/crypto.md, written from the
docs): jumbo UDP datagrams are sealed per flow with AES-128-CBC on an ordered group of
three NIC cores (their order kept), after a guard of the user's own that lets no
datagram to the discard port (9) through; the host writes them out. The second half,
tests/programs/cut_sealed.py, cuts the sealed datagrams for a 1500-byte link.

    offlow run tests/programs/seal_jumbo.py --input jumbo.pcap --output sealed.pcap \
        --opt flowkeys.path=keys.txt
"""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.crypto import CbcEncrypt, cbc_keys

JUMBO = 9000  # the largest frame: a jumbo link's


class NoDiscard(Element):
    """Drops (counted) a datagram to UDP port 9, the discard service: nothing to seal."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    drops = {"discard_port": "a datagram to port 9 (discard): not sealed"}
    body = r"""
    /* ParseL4 wrote the ports; "9" is discard } */
    if (state->ip_proto == 17 && state->dport == 9)
        DROP_WHY(discard_port);   // counted, never sealed "}"
    """


def program(cores: int = 3, cipher: str = "aes-128-cbc") -> Program:
    p = Program("seal_jumbo", mtu=JUMBO)
    flowkeys = cbc_keys("flowkeys", cipher=cipher)  # --opt flowkeys.path=FILE
    feed, eth, ip4, l4 = Source("feed"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("l4")
    guard, lock, out = NoDiscard("guard"), CbcEncrypt("lock", keys=flowkeys), Sink("out")
    rest = Discard("rest")
    feed >> eth
    eth["ipv4"] >> ip4 >> l4 >> guard >> lock >> out
    eth["ipv6"] >> rest
    eth["other"] >> rest
    p.segment("front", [feed, eth, ip4, l4, guard, rest], device="nic", cores=[0])
    p.segment("vault", [lock], device="nic", cores=range(1, 1 + cores), ordered=cores > 1)
    p.segment("back", [out], device="host")
    return p
