"""A user's IPv6 flow policy table, too wide for one control message, operated while it
runs (offlow ctl ... map: requests and replies in parts). Each IPv6 frame's flow (its
5-tuple, MAC addresses, VLAN, flow label, hop limit and ingress port: an odd 57-byte
key) is looked up in `policy`; a known flow's policy, when nonzero, is the traffic class
written into the frame, and a new flow is learned with policy 0 (the core's own update).
Comments in the body. DEVICE (host, nic or xdp) places it."""

import os

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv6, Discard, ParseEth

FLOW_KEY = (("src", "ipv6"), ("dst", "ipv6"), ("sport", "uint16_t"), ("dport", "uint16_t"),
            ("proto", "uint8_t"),                   # the 5-tuple: 37 bytes
            ("smac", "mac"), ("dmac", "mac"), ("vlan", "uint16_t"), ("label", "uint32_t"),
            ("hlim", "uint8_t"), ("ingress", "uint8_t"))


class Police(Element):
    """Sets a known flow's traffic class from its policy; learns a new flow."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    tables = ("flows",)
    body = r"""
    uint8_t *ip = pkt->data + state->l3_off;
    struct policy_key k;                   /* 57 bytes, packed */
    memset(&k, 0, sizeof k);
    memcpy(k.src, ip + 8, 16);             // the addresses as on the wire
    memcpy(k.dst, ip + 24, 16);
    memcpy(k.dmac, pkt->data, 6);
    memcpy(k.smac, pkt->data + 6, 6);
    if (state->l3_off >= 18)               /* tagged: the first tag's VLAN id */
        k.vlan = (uint16_t)((pkt->data[14] & 15) << 8 | pkt->data[15]);
    k.label = (uint32_t)(ip[1] & 15) << 16 | (uint32_t)ip[2] << 8 | ip[3];
    k.hlim = ip[7];
    k.proto = state->ip_proto;
    uint32_t l4 = state->l4_off;
    if ((k.proto == 17 || k.proto == 6) && l4 + 4u <= pkt->len) {
        k.sport = (uint16_t)(pkt->data[l4] << 8 | pkt->data[l4 + 1]);
        k.dport = (uint16_t)(pkt->data[l4 + 2] << 8 | pkt->data[l4 + 3]);
    }
    const uint64_t *policy = ofl_map_lookup(flows, &k);
    if (policy) {
        uint8_t tc = (uint8_t)*policy;
        if (tc) {                          /* the traffic class: 4 bits in each byte */
            ip[0] = (uint8_t)((ip[0] & 0xf0) | tc >> 4);
            ip[1] = (uint8_t)((ip[1] & 0x0f) | (tc & 15) << 4);
        }
    } else {
        uint64_t none = 0;
        (void)ofl_map_update(flows, &k, &none);   /* -ENOSPC when full: counted */
    }
    """


def program() -> Program:
    p = Program("v6_policy")
    wire, eth, v6 = Source("wire"), ParseEth("eth"), CheckIPv6("v6")
    police = Police("police", flows=SharedMap("policy", FLOW_KEY, "uint64_t", 5))
    out, other = Sink("out"), Discard("other")
    wire >> eth
    eth["ipv6"] >> v6 >> police >> out
    eth["ipv4"] >> other
    eth["other"] >> other
    p.segment("edge", [wire, eth, v6, police, out, other],
              device=os.environ.get("DEVICE", "host"), cores=[0])
    return p
