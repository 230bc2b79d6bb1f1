"""Floem's network sequencer (after Eris): every datagram sent to a group gets the
group's next sequence number, gap-free and strictly increasing in the order the
datagrams leave, on one core or several.

A group is a UDP destination port, `base` to `base + groups - 1`. The UDP payload is
prefixed with an 8-byte stamp: the group's number (0-based) and its sequence number
(1, 2, ...), both uint32 big-endian; the IPv4 and UDP lengths and the IPv4 checksum
follow, the UDP checksum becomes 0 (none).

The group lock: each group has a spin lock beside its counter (a `sequencer_table`
shared by every core of the segment). A core takes it, takes the next number, stamps
the datagram and sends it on (MAKE) before it lets the lock go, so what the element
sends next (a sink in its segment writes each datagram as it comes) leaves in sequence
order. Beyond the element that order holds as far as one path keeps it: a queue to
another segment keeps order per producer core only, so with several cores the numbers
stay gap-free and unique there but their interleaving is the rings'."""

from __future__ import annotations

from offlow.dsl import Element, Port, Shared
from offlow.elements.udp4 import UDP4_INCLUDE, UDP_DROPS, UDP_PAYLOAD
from offlow.errors import OfflowError

MAX_GROUPS = 65536  # one per UDP port


def sequencer_table(name: str, groups: int) -> Shared:
    """Each group's lock and last sequence number (two uint32 per group)."""
    return Shared(name, "uint32_t", 2 * groups)


class Sequence(Element):
    """Stamps each datagram to a group (UDP destination port base..base+groups-1) with
    the group's number and next sequence number, under the group's lock, and sends it
    on while it holds the lock. Packets stop here on purpose (counted as consumed) once
    the stamped copy is sent (counted as made)."""

    inputs = (Port("inp", "ip"),)  # after CheckIPv4 and ParseL4
    outputs = (Port("out", "ip"),)
    params = {"base": "uint32_t", "groups": "uint32_t"}
    tables = ("seqs",)
    includes = (UDP4_INCLUDE, "offlow/spin.h")  # spin.h: sched_yield, ofl_cpu_relax
    drops = {**UDP_DROPS,
             "no_group": "its UDP destination port is no group's",
             "too_long": "no room for the 8-byte stamp within the program's mtu",
             "wrapped": "its group has used all 2^32 - 1 sequence numbers"}
    helpers = r"""
    /* The group lock: bounded spin, then yield (cores never sleep in the kernel). */
    static inline void seq_lock(uint32_t *l)
    {
        uint32_t spins = 0;
        while (__atomic_load_n(l, __ATOMIC_RELAXED) ||
               __atomic_exchange_n(l, 1u, __ATOMIC_ACQUIRE)) {
            if (++spins < OFL_WAIT_SPINS) {
                ofl_cpu_relax();
            } else {
                spins = 0;
                sched_yield();
            }
        }
    }
    """
    body = UDP_PAYLOAD + r"""
    if (state->dport < base || state->dport - base >= groups)
        DROP_WHY(no_group);
    uint32_t g = state->dport - base;
    if (ofl_udp4_room(pkt, state->l3_off, off, OFL_MTU) < len + 8u)
        DROP_WHY(too_long);
    memmove(pkt->data + off + 8, pkt->data + off, len);
    ofl_put_be32(pkt->data + off, g);
    ofl_udp4_set_payload_len(pkt, state->l3_off, state->l4_off, len + 8u);
    state->l4_end = (uint16_t)pkt->len;
    uint32_t *lock = &seqs[2u * g], *last = &seqs[2u * g + 1u];
    seq_lock(lock);
    if (*last == UINT32_MAX) {
        __atomic_store_n(lock, 0u, __ATOMIC_RELEASE);
        DROP_WHY(wrapped);
    }
    *last += 1u;
    ofl_put_be32(pkt->data + off + 4, *last);
    MAKE(out, pkt);  /* sent on while the lock is held: it leaves in sequence order */
    __atomic_store_n(lock, 0u, __ATOMIC_RELEASE);
    CONSUME();
    """

    def __init__(self, name: str | None = None, *, base: int, groups: int,
                 seqs: Shared) -> None:
        name = name or "sequence"
        if not (0 < groups <= MAX_GROUPS and 0 <= base and base + groups <= MAX_GROUPS
                and seqs.length == 2 * groups):
            raise OfflowError(f"element `{name}`: base={base}, groups={groups}: 1..65536 "
                              f"groups on UDP ports base..base+groups-1 (at most 65535), and "
                              f"the table `{seqs.name}` holds {seqs.length} words "
                              f"(sequencer_table(name, groups) holds two per group)")
        super().__init__(name, base=base, groups=groups, seqs=seqs)
