/* pcap files as packet ports: a source that replays a capture, a sink that
 * writes one. Both use libpcap. */
#ifndef OFL_PCAP_PORT_H
#define OFL_PCAP_PORT_H

#include <stdint.h>

#include "offlow/pkt.h"
#include "offlow/src.h"

/* Open the capture at `path` as a source (replay rules in src.h). The whole file is
 * read at open into one allocation, keeping only this core's packets (index % nparts ==
 * part) that fit in `mtu`, so passes are cheap memcpys. Link types: Ethernet, and raw
 * IPv4/IPv6 (an Ethernet header with zero addresses and the IP version's ethertype is
 * put in front). ts_ns is the capture's timestamp (the same in every pass; microsecond
 * and nanosecond captures both read, to the nanosecond). A record
 * that cannot be read (the file cut short in the middle of one, a bogus length) ends
 * the capture there: the packets before it are the source's, and ofl_src_error says
 * where it broke off. Returns 0 and sets `*s` (NULL on failure), or a negative errno
 * with a message in `errbuf` (256 bytes): -ENOENT etc. when the file cannot be opened,
 * -EINVAL when it is not a capture (a bad file header), -EPROTONOSUPPORT for other
 * link types, -ENOMEM, or ofl_src_init's -EINVAL for bad options. */
int ofl_pcap_src_open(struct ofl_src **s, const char *path, const struct ofl_src_opts *o,
                      char *errbuf);

/* Packets of the capture as opened: all of them, and those this core replays. */
uint64_t ofl_pcap_src_file_packets(const struct ofl_src *s);
uint64_t ofl_pcap_src_own_packets(const struct ofl_src *s);

/* The longest frame of this core's packets in bytes (raw IP: with the Ethernet header
 * put in front), those longer than the mtu included: the mtu that takes them all
 * (records cut short by the snap length, never delivered, are not counted). */
uint32_t ofl_pcap_src_longest(const struct ofl_src *s);

/* A capture being written (Ethernet link type, nanosecond timestamps: magic 0xa1b23c4d,
 * which libpcap, tcpdump, Wireshark, dpkt and scapy read). */
struct ofl_pcap_sink;

/* Create (or truncate) `path` for writing packets cut to `snaplen` bytes. The file
 * header is written at once, and records are buffered (256 KiB) and written out in
 * whole records only, so the file is a readable capture at any moment, even after a
 * SIGKILL of the writer (unless it lands inside a write). Returns 0 and sets `*s`
 * (NULL on failure), or a negative errno with a message in `errbuf` (256 bytes). */
int ofl_pcap_sink_open(struct ofl_pcap_sink **s, const char *path, uint32_t snaplen,
                       char *errbuf);

/* Append packet `p` (its ts_ns becomes the record's time). Thread-safe: several
 * cores may share one sink (a mutex orders the records). */
void ofl_pcap_sink_write(struct ofl_pcap_sink *s, const struct ofl_pkt *p);

/* Packets written so far. */
uint64_t ofl_pcap_sink_packets(const struct ofl_pcap_sink *s);

/* Flush and close the file and free the sink (NULL is fine). Returns 0, or -EIO
 * when a write failed (disk full, ...). */
int ofl_pcap_sink_close(struct ofl_pcap_sink *s);

#endif
