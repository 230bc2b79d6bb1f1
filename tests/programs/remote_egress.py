"""A user's egress picker on a remote device, from docs/remote.md and docs/control.md
only: the host parses, `pick` (on `remote:edge` by default; PICK=nic or host moves it)
looks the IPv4 destination up in the user's own LPM table `egress` (11 ports), drops
what no prefix covers (reason `no_egress`) and counts each hop in an array of 12;
the host writes the hop into the last byte of the Ethernet destination and sends it.
`offlow ctl WINDOW route add/del ... --table egress` changes the table while it runs."""

import os

from offlow import Element, Port, Program, Shared, Sink, Source
from offlow.elements import CheckIPv4, Discard, ParseEth, lpm4_table


class Pick(Element):
    """The destination's egress port (1..11) from `egress`; counted per hop in `per_hop`."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"egress_port": "uint16_t"}
    drops = {"no_egress": "no prefix of `egress` covers the destination"}
    tables = ("egress", "per_hop")
    body = r"""
    uint16_t h = ofl_lpm4_lookup(egress, state->dst4);  /* 0: "none" } */
    if (h == 0)
        DROP_WHY(no_egress);
    per_hop[h % 12u]++;        // 12 slots; a hop is 1..11
    state->egress_port = h;
    """


class Label(Element):
    """Ethernet destination's last byte := the egress port."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    body = r"""
    pkt->data[5] = (uint8_t)state->egress_port;
    """


def program() -> Program:
    p = Program("remote_egress")
    egress = lpm4_table("egress", nports=11)
    wire, eth, v4, junk = Source("wire"), ParseEth("eth"), CheckIPv4("v4"), Discard("junk")
    pick = Pick("pick", egress=egress, per_hop=Shared("per_hop", "uint64_t", 12))
    label, out = Label("label"), Sink("out")
    wire >> eth
    eth["ipv4"] >> v4 >> pick >> label >> out
    eth["ipv6"] >> junk
    eth["other"] >> junk
    p.segment("rx", [wire, eth, v4, junk], device="host", cores=[0])
    p.segment("pick", [pick], device=os.environ.get("PICK", "remote:edge"), cores=[0])
    p.segment("tx", [label, out], device="host", cores=[1])
    return p
