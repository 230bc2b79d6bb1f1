/* Source and sink kind "afpacket": a Linux network interface through libpcap's live
 * capture (`offlow run --port afpacket:IFACE`, docs/ports.md).
 *
 * libpcap 1.10 reads an interface with AF_PACKET and a PACKET_MMAP TPACKET_V3 ring, and
 * is the core's already: this port is that, not a second ring written here. A source
 * takes only packets that arrive on the interface (not those the run sends). Core
 * `part` of `nparts` of a source's segment opens its own socket; with nparts > 1 they
 * join one PACKET_FANOUT group hashed on the flow, so each packet reaches one core.
 * A sink sends each packet with one write (pcap_inject). */
#ifndef OFL_LIVE_PORT_H
#define OFL_LIVE_PORT_H

#include "offlow/gen.h"
#include "offlow/src.h"

/* Open a source on interface `iface` with the common options `o`. Returns 0, or a
 * negative errno with libpcap's reason in `errbuf` (256 bytes): no such interface,
 * no permission. */
int ofl_live_src_open(struct ofl_src **s, const char *iface, const struct ofl_src_opts *o,
                      char *errbuf);

/* Open a sink on interface `iface` for `ncores` writers. Returns 0, or a negative errno
 * with the reason in `errbuf`. */
int ofl_live_sink_open(struct ofl_port_sink **k, const char *iface, unsigned ncores,
                       char *errbuf);

#endif
