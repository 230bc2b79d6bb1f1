"""A user's flow sampler: 1 in EVERY flows' packets (by a 32-bit FNV-1a hash of the
5-tuple: source and destination addresses, ports and protocol, as on the wire) are
copied to a mirror port; every frame goes out on the main port; each flow's bytes
(whole frames) are counted in a map. IPv4 and IPv6 (TCP and UDP have ports, other
protocols count as port 0); other frames go out uncounted and unsampled. EVERY is a
parameter, fixed when the program is made: `program(every=N)`, or the environment
variable EVERY (16 by default) for `offlow run`. Its own names, comments in the body,
helper functions. `--set edge.device=xdp` runs it in XDP; `split=True` puts the sinks
in a host segment of their own."""

import os

from offlow import Element, Port, Program, SharedMap, Sink, Source


class FlowSample(Element):
    """Counts each flow's bytes; copies the packets of 1 flow hash in `every` to `mirror`."""

    inputs = (Port("frame", "eth"),)
    outputs = (Port("out", "eth"), Port("mirror", "eth"))
    params = {"every": "uint32_t"}
    tables = ("flows",)
    helpers = r"""
    /* big-endian 16-bit read: ethertypes and ports are in network order */
    static inline uint16_t fs_be16(const uint8_t *p)
    {
        return (uint16_t)(p[0] << 8 | p[1]);
    }

    /* 32-bit FNV-1a over n bytes (n <= 64: a bound XDP's verifier can see) */
    static inline uint32_t fs_fnv1a(const uint8_t *p, uint32_t n)
    {
        uint32_t h = 2166136261u;
        for (uint32_t i = 0; i < n && i < 64u; i++) {
            h ^= p[i];
            h *= 16777619u;
        }
        return h;
    }
    """
    body = r"""
    #define ETH_LEN 14u
    uint32_t alen = 0, l4 = 0;   // address length (4 or 16), where TCP/UDP starts
    uint8_t proto = 0;
    struct flow_bytes_key k;
    memset(&k, 0, sizeof k);
    if (pkt->len < ETH_LEN)
        EMIT(out);   /* not even an Ethernet header */
    switch (fs_be16(pkt->data + 12)) {
    case 0x0800: {   /* IPv4: addresses at 12 and 16 of the header */
        const uint8_t *ip = pkt->data + ETH_LEN;
        if (pkt->len < ETH_LEN + 20u || (ip[0] >> 4) != 4u)
            EMIT(out);
        alen = 4;
        proto = ip[9];
        memcpy(k.src, ip + 12, 4);
        memcpy(k.dst, ip + 16, 4);
        /* a later fragment has no ports: 0 and 0 */
        if ((fs_be16(ip + 6) & 0x1fffu) == 0)
            l4 = ETH_LEN + (ip[0] & 0x0fu) * 4u;
        break;
    }
    case 0x86dd: {   /* IPv6: addresses at 8 and 24 (no extension headers looked at) */
        const uint8_t *ip = pkt->data + ETH_LEN;
        if (pkt->len < ETH_LEN + 40u)
            EMIT(out);
        alen = 16;
        proto = ip[6];
        memcpy(k.src, ip + 8, 16);
        memcpy(k.dst, ip + 24, 16);
        l4 = ETH_LEN + 40u;
        break;
    }
    default:
        EMIT(out);   // neither: no flow
    }
    k.family = alen == 4 ? 4 : 6;
    k.proto = proto;
    if ((proto == 6 || proto == 17) && l4 && l4 + 4u <= pkt->len && l4 < 128u) {
        k.sport = fs_be16(pkt->data + l4);
        k.dport = fs_be16(pkt->data + l4 + 2);
    }
    /* hashed as on the wire: src, dst, sport, dport (big-endian), proto */
    uint8_t tuple[37];
    memcpy(tuple, k.src, 16);
    memcpy(tuple + alen, k.dst, 16);
    tuple[2 * alen] = (uint8_t)(k.sport >> 8);
    tuple[2 * alen + 1] = (uint8_t)k.sport;
    tuple[2 * alen + 2] = (uint8_t)(k.dport >> 8);
    tuple[2 * alen + 3] = (uint8_t)k.dport;
    tuple[2 * alen + 4] = proto;
    uint64_t *bytes = ofl_map_lookup(flows, &k);
    if (bytes)
        __sync_fetch_and_add(bytes, (uint64_t)pkt->len);   /* CPUs share it on xdp */
    else {
        uint64_t first = pkt->len;
        (void)ofl_map_update(flows, &k, &first);
    }
    if (fs_fnv1a(tuple, 2 * alen + 5) % every == 0)
        SEND(mirror);
    EMIT(out);   /* several outputs: no default one */
    """


def program(every: int | None = None, split: bool = False) -> Program:
    """The sampler on the emulated NIC (`edge`); `split`: its sinks on the host."""
    p = Program("flow_sample")
    wire = Source("wire")
    key = (("family", "uint8_t"), ("src", "ipv6"), ("dst", "ipv6"), ("sport", "uint16_t"),
           ("dport", "uint16_t"), ("proto", "uint8_t"))
    sample = FlowSample("sample", every=every or int(os.environ.get("EVERY", "16")),
                        flows=SharedMap("flow_bytes", key, "uint64_t", 4096))
    out, mirror = Sink("out"), Sink("mirror")
    wire >> sample
    sample["out"] >> out
    sample["mirror"] >> mirror
    if split:
        p.segment("edge", [wire, sample], device="nic", cores=[0])
        p.segment("app", [out, mirror], device="host", cores=[0])
        return p
    p.segment("edge", [wire, sample, out, mirror], device="nic", cores=[0])
    return p
