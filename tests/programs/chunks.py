"""A user's program that makes several packets from one (MAKE): every IPv4 UDP
datagram is cut into datagrams of at most `piece` bytes of payload, each a packet of
its own with the same addresses and ports, lengths and checksums set; the datagram
itself is used up. Other packets go through as they are. The cutter runs on the NIC,
the sink on the host, so the made packets cross a queue.

`Jumbo` makes, for each other packet, one a byte longer than the mtu: dropped and
counted at the element (a made packet never overruns a queue entry)."""

from offlow import Element, Port, Program, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth


class UdpPieces(Element):
    """Cuts UDP datagrams into pieces of `piece` payload bytes."""

    inputs = (Port("datagram", "ip.v4"),)
    outputs = (Port("piece_out", "ip.v4"), Port("other", "ip.v4"))
    params = {"piece": "uint32_t"}
    drops = {"cut_short": "a UDP header cut by the frame"}
    helpers = r"""
    /* the IPv4 header checksum, over `hl` bytes, field zeroed first */
    static inline void pieces_ip_csum(uint8_t *ip, uint32_t hl)
    {
        ip[10] = ip[11] = 0;
        ofl_put_be16(ip + 10, ofl_csum(ip, hl));
    }
    """
    body = r"""
    const uint8_t *ip = pkt->data + state->l3_off;
    uint32_t hl = (uint32_t)(ip[0] & 0x0F) * 4u;
    if (ip[9] != 17)                     /* not UDP: as it is */
        EMIT(other);
    uint32_t l4 = state->l3_off + hl, hdrs = l4 + 8u;
    if (pkt->len < hdrs)
        DROP_WHY(cut_short);
    uint32_t total = ofl_get_be16(ip + 2) - hl - 8u;   /* UDP payload bytes */
    uint8_t buf[2048];
    for (uint32_t off = 0; off < total; off += piece) {
        uint32_t n = total - off < piece ? total - off : piece;
        memcpy(buf, pkt->data, hdrs);                  // same Ethernet, IP, UDP headers
        memcpy(buf + hdrs, pkt->data + hdrs + off, n);
        uint8_t *nip = buf + state->l3_off, *udp = buf + l4;
        ofl_put_be16(nip + 2, (uint16_t)(hl + 8u + n));
        ofl_put_be16(nip + 4, (uint16_t)(ofl_get_be16(ip + 4) + off / piece));
        nip[6] &= 0x40; nip[7] = 0;                    /* whole datagrams: no fragments */
        pieces_ip_csum(nip, hl);
        ofl_put_be16(udp + 4, (uint16_t)(8u + n));
        udp[6] = udp[7] = 0;
        uint64_t sum = ofl_csum_add(0, nip + 12, 8) + 17u + 8u + n;
        uint16_t c = (uint16_t)~ofl_csum_fold(ofl_csum_add(sum, udp, 8u + n));
        ofl_put_be16(udp + 6, c ? c : 0xFFFF);
        struct ofl_pkt one = { .data = buf, .len = hdrs + n, .cap = sizeof buf,
                               .ts_ns = pkt->ts_ns };
        MAKE(piece_out, &one);
    }
    CONSUME();
    """


class Jumbo(Element):
    """Makes, for each packet, one a byte longer than the mtu (its bytes repeated)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    static uint8_t big[OFL_MTU + 1u];
    for (uint32_t i = 0; i < sizeof big; i++)
        big[i] = pkt->data[i % pkt->len];
    struct ofl_pkt over = { .data = big, .len = sizeof big, .cap = sizeof big,
                            .ts_ns = pkt->ts_ns };
    MAKE(out, &over);
    EMIT(out);
    """


def program(piece: int = 37) -> Program:
    p = Program("chunks")
    src, eth, ip4 = Source("wire"), ParseEth("eth"), CheckIPv4("ip4")
    cut, big, tx = UdpPieces("cutter", piece=piece), Jumbo("jumbo"), Sink("tx")
    no6, no_ip = Discard("no6"), Discard("no_ip")
    src >> eth
    eth["ipv4"] >> ip4 >> cut
    eth["ipv6"] >> no6
    eth["other"] >> no_ip
    cut["piece_out"] >> tx
    cut["other"] >> big >> tx
    p.segment("nic_side", [src, eth, ip4, cut, big, no6, no_ip], device="nic", cores=[0])
    p.segment("host_side", [tx], device="host", cores=[0])
    return p
