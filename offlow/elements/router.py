"""Router elements: longest-prefix match on IPv4/IPv6 destinations and the next-hop
rewrite.  The tables are Table objects: built at start-up from a prefix file in the
memory of the device whose segment holds the lookup (see docs/router.md)."""

from __future__ import annotations

from pathlib import Path

from offlow.dsl import Element, Port, Table


def lpm4_table(name: str, path: str | Path | None = None, nports: int = 16) -> Table:
    """A DIR-24-8 IPv4 table built from a prefix file (`--opt NAME.path=` overrides)."""
    return _lpm_table(name, "struct ofl_lpm4", "ofl_lpm4", path, nports, "DIR-24-8")


def lpm6_table(name: str, path: str | Path | None = None, nports: int = 16) -> Table:
    """An IPv6 table (a multibit trie, with the hash levels of binary search on prefix
    lengths for the gpu target) built from a prefix file."""
    return _lpm_table(name, "struct ofl_lpm6", "ofl_lpm6", path, nports, "multibit trie")


def _lpm_table(name: str, ctype: str, prefix: str, path: str | Path | None, nports: int,
               what: str) -> Table:
    opts = (("nports", str(nports)),) + ((("path", str(path)),) if path else ())
    return Table(name, ctype, f"{prefix}_open_opts", f"{prefix}_free", options=opts,
                 source=what, pack_fn=f"{prefix}_pack", open_blob_fn=f"{prefix}_open_blob",
                 ctl_fn=f"{prefix}_ctl", stats_fn=f"{prefix}_stats_json",
                 includes=("offlow/lpm_tables.h",), keys=("nports", "path"))


class LookupIPv4(Element):
    """Next hop of the IPv4 destination (longest prefix match); unroutable packets are
    dropped (counted here)."""

    inputs = (Port("inp", "ip.v4"),)
    outputs = (Port("out", "ip.v4"),)
    fields = {"hop": "uint16_t"}
    field_docs = {"hop": "the next hop, 1..nports (the table's next-hop rule)"}
    drops = {"unroutable": "no route covers the destination"}
    tables = ("routes",)
    body = r"""
    uint16_t hop = ofl_lpm4_lookup(routes, state->dst4);
    if (!hop)
        DROP_WHY(unroutable);
    state->hop = hop;
    """
    # over a batch: the table's batched lookup, whose cache misses overlap
    batch_body = r"""
    uint32_t dst[OFL_VEC];
    uint16_t hop[OFL_VEC];
    for (uint32_t i = 0; i < n; i++)
        dst[i] = states[i].dst4;
    ofl_lpm4_lookup_batch(routes, dst, hop, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!hop[i])
            DROP_WHY_AT(i, unroutable);
        states[i].hop = hop[i];
    }
    """


class LookupIPv6(Element):
    """Next hop of the IPv6 destination; unroutable packets are dropped (counted here)."""

    inputs = (Port("inp", "ip.v6"),)
    outputs = (Port("out", "ip.v6"),)
    fields = {"hop": "uint16_t"}
    field_docs = {"hop": "the next hop, 1..nports (the table's next-hop rule)"}
    drops = {"unroutable": "no route covers the destination"}
    tables = ("routes",)
    body = r"""
    uint16_t hop = ofl_lpm6_lookup(routes, state->dst6);
    if (!hop)
        DROP_WHY(unroutable);
    state->hop = hop;
    """
    batch_body = r"""
    uint8_t dst[OFL_VEC][16];
    uint16_t hop[OFL_VEC];
    for (uint32_t i = 0; i < n; i++)
        memcpy(dst[i], states[i].dst6, 16);
    ofl_lpm6_lookup_batch(routes, &dst[0][0], hop, n);
    for (uint32_t i = 0; i < n; i++) {
        if (!hop[i])
            DROP_WHY_AT(i, unroutable);
        states[i].hop = hop[i];
    }
    """


class SetNextHop(Element):
    """Rewrites the Ethernet addresses for next hop `hop` (leaving by port `hop`):
    destination 02:00:00:01:HH:LL, source 02:00:00:00:HH:LL (HHLL = hop)."""

    inputs = (Port("inp", "ip"),)
    outputs = (Port("out", "ip"),)
    body = r"""
    uint8_t *d = pkt->data;
    static const uint8_t dst[4] = {0x02, 0x00, 0x00, 0x01};
    static const uint8_t src[4] = {0x02, 0x00, 0x00, 0x00};
    memcpy(d, dst, 4);
    memcpy(d + 6, src, 4);
    d[4] = d[10] = (uint8_t)(state->hop >> 8);
    d[5] = d[11] = (uint8_t)state->hop;
    """
