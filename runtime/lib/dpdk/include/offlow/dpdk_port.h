/* Packet ports on DPDK's ethdev: source and sink kind "dpdk" (gen.h's struct
 * ofl_src_kind), selected with `offlow run --port dpdk:ARGS` (docs/ports.md).
 *
 * ARGS names one ethdev port: EAL virtual-device arguments
 * ("net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap", "net_af_packet0,iface=veth0",
 * "net_tap0,iface=tap0") or the PCI address of a NIC bound to a DPDK driver
 * ("0000:01:00.0"). The first port a process opens initialises DPDK's EAL (one per
 * process, DPDK's own rule: this library holds it) without hugepages; later ports are
 * probed into it. Source and sink of one ARGS in one process share the port.
 *
 * A source on core `part` of `nparts` reads RX queue `part`: the port is configured
 * with one RX queue per core of the source's segment and RSS over them (a port with
 * fewer RX queues is refused when opened). A sink takes one TX queue per core of its
 * segment. The port is configured and started on the first packet call, when every
 * source and sink of the process has said what it needs.
 *
 * This header names no DPDK type: a program that uses the port does not see DPDK's
 * headers. */
#ifndef OFL_DPDK_PORT_H
#define OFL_DPDK_PORT_H

#include "offlow/gen.h"
#include "offlow/src.h"

/* Source kind "dpdk": opens the port of option "<name>.port" (ARGS) and reads its
 * RX queue o->part. Returns 0, or a negative errno with the reason in `errbuf`
 * (256 bytes): EAL or the PMD failed, too few RX queues. */
int ofl_dpdk_src_open(struct ofl_src **s, const struct ofl_args *a, const char *name,
                      const struct ofl_src_opts *o, char *errbuf);

/* Sink kind "dpdk": opens the port of option "<name>.port" for `ncores` writers (one TX
 * queue each). Returns 0, or a negative errno with the reason in `errbuf`. */
int ofl_dpdk_sink_open(struct ofl_port_sink **k, const struct ofl_args *a, const char *name,
                       unsigned ncores, char *errbuf);

/* Packet buffers (mbufs) of this process's pool that are taken: lent to the program,
 * in a TX queue or a sink's batch, held by the port. 0 before the EAL starts. */
unsigned ofl_dpdk_mbufs_in_use(void);

#endif
