/* Packet sources: one handle for every kind (a pcap file, synthetic traffic).
 *
 * Generated code opens a source through its kind's open function (pcap_port.h,
 * synth.h) and then only calls ofl_src_next / ofl_src_close, which dispatch
 * through the handle's ops. A source is used by one thread; data-parallel
 * segments open one source per core with `part` / `nparts`.
 *
 * Replay and stop rules, the same for every kind:
 *   - a pass is one replay of the packets (a capture, or `count` synthetic ones);
 *   - duration_ns > 0: passes repeat until that much time has elapsed since the
 *     first ofl_src_next call (`loops` is ignored);
 *   - else `loops` passes (0 is taken as 1);
 *   - core `part` of `nparts` takes the packets whose index within a pass is
 *     congruent to `part` modulo `nparts`, so the cores together deliver each
 *     packet of each pass exactly once;
 *   - rate_pps > 0 paces this core with a token bucket (about 1 ms of burst);
 *   - a captured packet longer than `mtu` is never delivered: it is counted as
 *     dropped (synthetic sources refuse sizes above the mtu when opened);
 *   - a capture's record that holds fewer bytes than its frame had (cut by the
 *     capture's snap length) is never delivered: it is counted as cut, per pass. */
#ifndef OFL_SRC_H
#define OFL_SRC_H

#include <stdint.h>

#include "offlow/pkt.h"

/* ofl_src_next: the source is finished (distinct from queue.h's OFL_Q_DONE). */
#define OFL_SRC_DONE (-4098)

/* Options common to every kind of source. */
struct ofl_src_opts {
    uint64_t loops;        /* passes (0 = 1); ignored when duration_ns > 0 */
    uint64_t duration_ns;  /* > 0: replay until this much time has elapsed */
    double rate_pps;       /* packets per second of this core; 0 = as fast as possible */
    uint32_t part, nparts; /* this core's share (nparts 0 = 1; part < nparts) */
    uint32_t mtu;          /* buffer stride of ofl_src_next and largest packet (> 0) */
    uint64_t count;        /* synthetic sources: packets per pass (all parts together) */
    uint64_t seed;         /* synthetic sources: the generator's seed */
    int advance_ts;        /* pcap: each replay's timestamps go on after the previous
                              pass's (shifted by the capture's span + 1 ns), a stream
                              whose time never goes back; 0: every pass repeats them */
};

struct ofl_src;

/* What a kind provides. `next` fills up to `n` (>= 1) packets, as ofl_src_next,
 * and returns OFL_SRC_DONE when its passes are over; with duration_ns > 0 it must
 * replay for ever (the common code stops it). `close` frees the handle. */
struct ofl_src_ops {
    const char *kind;
    int (*next)(struct ofl_src *s, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n);
    void (*close)(struct ofl_src *s);
};

/* The common part of every source; a kind's struct starts with it. */
struct ofl_src {
    const struct ofl_src_ops *ops;
    struct ofl_src_opts o;
    char name[64];                /* kind and what it reads, for messages */
    uint64_t packets, bytes;      /* delivered */
    uint64_t dropped;             /* not delivered: longer than the mtu */
    uint64_t cut;                 /* not delivered: a capture's record cut short by its
                                     snap length (fewer bytes than the frame had) */
    uint64_t missed;              /* a port's (afpacket, dpdk): frames it dropped before
                                     the source read them (its ring was full) */
    char error[256];              /* a fault it went on from (ofl_src_error), "" if none */
    int done;                     /* OFL_SRC_DONE was returned */
    int started;                  /* the first ofl_src_next call happened */
    uint64_t t_start_ns;          /* time of the first ofl_src_next call */
    uint64_t t_last_ns;           /* token bucket: last refill */
    uint64_t now_ns;              /* the clock ofl_src_next read for this call (0: it
                                     read none): a kind may stamp its packets with it */
    double tokens, burst;         /* token bucket: packets allowed now, most allowed */
};

/* Check `o` and fill the common part of `s` (used by the kinds' open functions).
 * Returns 0, or -EINVAL with a message in `errbuf` (256 bytes) for bad options. */
int ofl_src_init(struct ofl_src *s, const struct ofl_src_ops *ops,
                 const struct ofl_src_opts *o, const char *name, char *errbuf);

/* Fill up to `n` packets: pkts[i].data = bufs + i * mtu, cap = mtu, len, ts_ns.
 * Returns the number filled (> 0), 0 when none is allowed now (rate limit; call
 * again), OFL_SRC_DONE when finished (and on every later call), or a negative
 * error. */
int ofl_src_next(struct ofl_src *s, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n);

/* Free the source (NULL is fine). */
void ofl_src_close(struct ofl_src *s);

/* Counters for the stats file: packets and bytes delivered, packets dropped. */
uint64_t ofl_src_packets(const struct ofl_src *s);
uint64_t ofl_src_bytes(const struct ofl_src *s);
uint64_t ofl_src_dropped(const struct ofl_src *s);

/* Records of a capture not delivered because they hold fewer bytes than the frame
 * had (cut by the capture's snap length): 0 for ports and synthetic sources. */
uint64_t ofl_src_cut(const struct ofl_src *s);

/* Frames a port dropped before the source read them (0 for files and synthetic). */
uint64_t ofl_src_missed(const struct ofl_src *s);

/* The source's kind ("pcap", "synth"). */
const char *ofl_src_kind(const struct ofl_src *s);

/* A fault in the input the source went on from, for the run to report (a capture
 * cut short: its packets before the cut are delivered), or NULL when none. */
const char *ofl_src_error(const struct ofl_src *s);

/* CLOCK_MONOTONIC in nanoseconds (the clock of duration and rate). */
uint64_t ofl_src_clock_ns(void);

#endif
