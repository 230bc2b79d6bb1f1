"""A user's SYN-flood detector: a hash map counts the TCP SYNs (SYN set, ACK clear) of
each source /24; once a /24 has sent more than LIMIT (an environment variable, 8 by
default) its further SYNs leave by a second port (`suspect`, discarded here) while
everything else goes out. Its own names, comments in the body, a helper. `split=True`
puts the sink in a host segment of its own."""

import os

from offlow import Element, Port, Program, SharedMap, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth


class SynWatch(Element):
    """Counts each source /24's SYNs; SYNs past `limit` go to `suspect`."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("pass_on", "ip.v4"), Port("suspect", "ip.v4"))
    params = {"limit": "uint32_t"}
    tables = ("nets",)
    helpers = r"""
    /* a bare SYN: the first segment of a handshake, no ACK yet */
    static inline int sw_bare_syn(uint8_t flags) { return (flags & 0x12u) == 0x02u; }
    """
    body = r"""
    #define FLAGS_AT 13u   // TCP flags byte, from the start of the TCP header
    if (state->ip_proto != 6 || state->ip_frag || state->l4_off + FLAGS_AT >= state->l4_end)
        EMIT(pass_on);     /* not TCP, a later fragment, or no flags byte */
    if (!sw_bare_syn(pkt->data[state->l4_off + FLAGS_AT]))
        EMIT(pass_on);
    struct syn_nets_key k;
    memcpy(k.net, pkt->data + state->l3_off + 12, 3);   // the source's /24
    k.net[3] = 0;
    uint32_t *seen = ofl_map_lookup(nets, &k);
    uint32_t now = 1;
    if (seen)
        now = __sync_add_and_fetch(seen, 1);   /* CPUs share it on xdp */
    else
        (void)ofl_map_update(nets, &k, &now);
    if (now > limit)
        EMIT(suspect);
    EMIT(pass_on);   /* several outputs: no default one */
    """


def program(split: bool = False) -> Program:
    """The detector on the emulated NIC (`edge`); `split`: its output on the host (`app`),
    the counting and the discards staying on the NIC."""
    p = Program("syn_watch")
    wire, eth, v4 = Source("wire"), ParseEth("eth"), CheckIPv4("v4")
    watch = SynWatch("watch", limit=int(os.environ.get("LIMIT", "8")),
                     nets=SharedMap("syn_nets", (("net", "ipv4"),), "uint32_t", 1024))
    out, suspect, other = Sink("out"), Discard("suspect"), Discard("other")
    wire >> eth
    eth["ipv4"] >> v4 >> watch
    watch["pass_on"] >> out
    watch["suspect"] >> suspect
    eth["ipv6"] >> other
    eth["other"] >> other
    if split:
        p.segment("edge", [wire, eth, v4, watch, suspect, other], device="nic", cores=[0])
        p.segment("app", [out], device="host", cores=[0])
        return p
    p.segment("edge", [wire, eth, v4, watch, out, suspect, other], device="nic", cores=[0])
    return p
