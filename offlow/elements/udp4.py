"""What the elements that rewrite an IPv4/UDP datagram's payload share (crypto, words,
sequencer): the drop reason for what is no such datagram, and the C that finds the
payload (runtime/lib/crypto/include/offlow/udp4_payload.h)."""

from __future__ import annotations

UDP4_INCLUDE = "offlow/udp4_payload.h"
UDP_DROPS = {"not_udp": "not a whole IPv4/UDP datagram: IPv6, another protocol, a fragment, "
                        "or a UDP length that does not fit the packet"}
# Where the payload is (after CheckIPv4 and ParseL4): `off` and `len` for the rest of the
# body; anything else is dropped as not_udp.
UDP_PAYLOAD = r"""
    uint32_t off, len;
    if (state->ip_proto != 17 || state->ip_frag ||
        ofl_udp4_payload(pkt, state->l3_off, state->l4_off, state->l4_end, &off, &len))
        DROP_WHY(not_udp);
"""
