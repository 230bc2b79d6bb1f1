"""A program written the way users write them, around the crypto elements: its own
element names, comments in the C bodies, a #define, an element of its own that calls the
crypto library (naming its header in `includes`).

The NIC takes sealed datagrams and opens them (CBC decryption per flow, keys from
`--opt vault.path=`), on an ordered core group (their order kept); the host stamps each
datagram's payload with a 3-chain MD5 digest in front of it (the digest, then the
plaintext) and sends it on."""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, ParseL4
from offlow.elements.crypto import CbcDecrypt, cbc_keys


class StampDigest(Element):
    """Puts the payload's 3-chain digest (16 bytes) in front of the payload."""

    inputs = (Port("opened", "ip"),)
    outputs = (Port("stamped", "ip"),)
    includes = ("offlow/md5x.h", "offlow/udp4_payload.h")
    drops = {"no_room": "the payload and 16 more bytes do not fit the frame",
             "odd": "not a UDP datagram the stamp can read"}
    body = r"""
    #define CHAINS 3u   /* three chains: the seed's K, on one core */
    uint32_t at, n;
    if (ofl_udp4_payload(pkt, state->l3_off, state->l4_off, state->l4_end, &at, &n))
        DROP_WHY(odd);                       // ParseL4 let it through: not a datagram
    if (ofl_udp4_room(pkt, state->l3_off, at, OFL_MTU) < n + OFL_MD5_LEN)
        DROP_WHY(no_room);
    uint8_t d[OFL_MD5_LEN];
    ofl_md5_chains(pkt->data + at, n, CHAINS, d);
    memmove(pkt->data + at + OFL_MD5_LEN, pkt->data + at, n);   /* make room in front */
    memcpy(pkt->data + at, d, sizeof d);
    ofl_udp4_set_payload_len(pkt, state->l3_off, state->l4_off, n + OFL_MD5_LEN);
    """


def program(cipher: str = "bf-cbc", cores: int = 2) -> Program:
    p = Program("sealed")
    vault = cbc_keys("vault", cipher=cipher)  # the key file comes with --opt vault.path=
    wire, eth, ip4, l4 = Source("wire"), ParseEth("eth"), CheckIPv4("ip4"), ParseL4("ports")
    opener, stamp, out = CbcDecrypt("opener", keys=vault), StampDigest("stamp"), Sink("out")
    junk = Discard("junk")
    wire >> eth
    eth["ipv4"] >> ip4 >> l4 >> opener >> stamp >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("rx", [wire, eth, ip4, l4, junk], device="nic", cores=[0])
    p.segment("open", [opener], device="nic", cores=range(1, 1 + cores), ordered=cores > 1)
    p.segment("app", [stamp, out], device="host")
    return p
