/* Support for generated programs: command-line options, segment cores, packet
 * ports by name, the element body macros, and the stats file.
 *
 * Generated code is the only user of this header; everything here is glue
 * between the generator's output and the runtime modules, kept out of the
 * generator so the generated C stays short and readable. */
#ifndef OFL_GEN_H
#define OFL_GEN_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "offlow/chan.h"
#include "offlow/copy.h"
#include "offlow/pkt.h"
#include "offlow/queue.h"
#include "offlow/src.h"
#include "offlow/stats.h"
#include "offlow/wait.h"
#include "offlow/window.h"

/* ---- element body macros ------------------------------------------------ */

/* Set in the mask when a body chose explicitly (EMIT or DROP). */
#define OFL_DECIDED (1u << 31)
/* Emit the packet on output `p` and leave the body. */
#define EMIT(p) do { *ofl_mask_ |= OFL_DECIDED | (1u << OFL_PORT_##p); return; } while (0)
/* Also send the packet out on `p` (a copy when several ports are chosen); go on. */
#define SEND(p) (*ofl_mask_ |= (1u << OFL_PORT_##p))
/* Drop the packet (counted at this element) and leave the body. */
#define DROP() do { *ofl_mask_ = OFL_DECIDED; return; } while (0)
/* Set with OFL_DECIDED when a body dropped the packet for a reason it names
 * (DROP_WHY): the reason's number is in the low byte instead of port bits. */
#define OFL_WHY (1u << 29)
/* Drop the packet for reason `r`, one of the element's `drops` (counted at this
 * element, per reason), and leave the body. */
#define DROP_WHY(r) do { *ofl_mask_ = OFL_DECIDED | OFL_WHY | OFL_WHY_##r; return; } while (0)
/* Set with OFL_DECIDED when a body used the packet up (CONSUME); output port bits
 * stay below OFL_WHY (the compiler allows at most 29 outputs: MAX_OUTPUTS). */
#define OFL_CONSUMED (1u << 30)
/* The packet ends here on purpose, its work done (a reply that only updated a
 * table, say): counted as consumed at this element, not as a drop; leave the body. */
#define CONSUME() do { *ofl_mask_ = OFL_DECIDED | OFL_CONSUMED; return; } while (0)

/* Send a packet the body built, `p` (a struct ofl_pkt *: data, len, cap, ts_ns), out
 * on port `port` now, with a copy of the packet's state as it is; go on. What follows
 * takes its own copy before MAKE returns, so the body may reuse the bytes at once.
 * Counted as made at this element (one send cut into many packets: MAKE each piece,
 * then CONSUME() the send); one longer than the mtu or its cap goes no further
 * (dropped and counted: made_too_long). */
#define MAKE(port, p) OFL_MAKE_(ctx, OFL_PORT_##port, (p), state)

/* In a channel handler: run `call` (a negative errno on failure); an error ends the
 * handler, which reports it (the manager then closes the channel). */
#define OFL_HANDLER_TRY_(call)                                                  \
    do {                                                                        \
        int ofl_rc_ = (call);                                                   \
        if (ofl_rc_ < 0) {                                                      \
            *ofl_err_ = ofl_rc_;                                                \
            return;                                                             \
        }                                                                       \
    } while (0)

/* In a channel handler: answer the message with `n` bytes at `p` (at most 56; the
 * manager delivers it when the host receives). An error ends the handler, which
 * reports it. (A handler body may also end early with `return;`.) */
#define REPLY(p, n) OFL_HANDLER_TRY_(ofl_chan_post(ofl_end_, (p), (n)))

/* In a channel handler: answer the message in bulk with the `n` bytes at `p` (any
 * size; the host takes them with bulk_recv). The manager sends them beside its other
 * channels once the handler has returned (ofl_chan_mgr_bulk_send), so `p` must be
 * memory that outlives the handler, a table, and stay unchanged until the host has
 * them all: bytes that change during the transfer fail it on both sides (the CRC
 * check). One waits at most: -EBUSY while the previous one has not started. An
 * error ends the handler, which reports it. */
#define BULK_REPLY(p, n)                                                        \
    OFL_HANDLER_TRY_(ofl_chan_mgr_bulk_send(proc->chan_mgr, ofl_end_->region,   \
                                            ofl_end_->id, ofl_end_->side, (p), (n)))

/* Call `fn` on a private copy of the packet and its state (several outputs chosen). */
#define OFL_CALL_ON_COPY(fn, ctx, pkt, state)                                   \
    do {                                                                        \
        uint8_t ofl_copy_buf_[OFL_MTU] __attribute__((aligned(8)));            \
        struct ofl_pkt ofl_copy_pkt_ = *(pkt);                                  \
        struct ofl_state ofl_copy_state_ = *(state);                            \
        memcpy(ofl_copy_buf_, (pkt)->data, (pkt)->len);                         \
        ofl_copy_pkt_.data = ofl_copy_buf_;                                     \
        fn((ctx), &ofl_copy_pkt_, &ofl_copy_state_);                            \
    } while (0)

/* ---- options -------------------------------------------------------------- */

#define OFL_MAX_OPTS 64

/* Options of one device process, from its command line. */
struct ofl_args {
    const char *device;       /* the device's name: "host", "nic" (for messages) */
    const char *window;       /* --window PATH */
    const char *stats;        /* --stats PATH (NULL: no stats file) */
    bool init;                /* --init: create and format the window, then exit */
    bool serve;               /* --serve: after the packets, serve channels until stopped */
    int peer_fds[4];          /* --peer-fd N: liveness pipes of the other processes */
    int npeers;
    int cpu_base;             /* --cpu-base N: CPU of this device's core 0 */
    int ce_mode;              /* --ce inline|thread */
    int udp_fd;               /* --udp-fd N: the run's UDP socket (-1: none); a process
                                 given one blocks SIGINT/SIGTERM and takes them as a
                                 request to stop cleanly (stop.h) */
    int runner_fd;            /* --runner-fd N: the runner's liveness pipe (-1: none;
                                 lifeline.h) */
    int nopts;                /* --opt NAME.KEY=VALUE */
    const char *opt_key[OFL_MAX_OPTS];
    const char *opt_val[OFL_MAX_OPTS];
    size_t opt_keylen[OFL_MAX_OPTS];
};

/* Parse argv into `a`; prints a message and returns -EINVAL on a bad option.
 * With --udp-fd it also blocks SIGINT and SIGTERM (ofl_stop_signals_block): call it
 * before starting any thread. */
int ofl_args_parse(struct ofl_args *a, int argc, char **argv, const char *device);

/* Value of option "<name>.<key>", or `dflt` when absent. */
const char *ofl_args_get(const struct ofl_args *a, const char *name, const char *key,
                         const char *dflt);

/* Print "offlow <device>: <msg>" to stderr; returns 1 (an exit status). */
int ofl_fatal(const char *msg);

/* Like ofl_fatal, with the runtime's text for error `err`. */
int ofl_fatal_err(const char *msg, int err);

/* Open the window created by --init and check its size; prints errors. */
int ofl_proc_open(struct ofl_window *w, const struct ofl_args *a, size_t size);

/* --init: record this process's parent, the runner, in the window header (attach
 * refuses a window whose runner is gone). */
void ofl_window_mark_runner(struct ofl_window *w);

/* Tell every process sharing the window to stop (a fatal error happened here). */
void ofl_window_abort(struct ofl_window *w);

/* --init: format the channel region at `off` in the window, create `n` channels
 * named `names` (looked up by name later) and record the region in the header,
 * where host sessions find it. Returns 0 or a negative errno. */
int ofl_gen_channels(struct ofl_window *w, size_t off, unsigned n, const char *const *names);

/* Have manager `m` serve side B of channel `name` of the window's region with
 * `handler(ctx, ...)`. Prints the reason and returns a negative errno on failure. */
int ofl_gen_serve(struct ofl_chan_mgr *m, struct ofl_window *w, size_t off, const char *name,
                  ofl_chan_handler handler, void *ctx);

/* --serve: once the packets are done, count this process in the window's drained
 * word and wait until the host session sets the window's
 * stop word (or a stop signal is pending, stop.h; or the abort word, or the parent
 * process exits), keeping the channel managers running. Sleeps in 1 ms steps: this
 * is an idle wait, not a hand-off.
 * Returns 0 when stopped, -ECANCELED on abort, -EPIPE when the parent is gone. */
int ofl_serve_until_stopped(struct ofl_window *w);

/* ---- segment cores ---------------------------------------------------------- */

/* One thread running one segment on one core. */
struct ofl_core {
    const char *device;
    const char *segment;
    unsigned idx, n;          /* this core's index in the segment, and how many */
    int cpu;                  /* the CPU it is pinned to */
    int oversubscribed;
    struct ofl_waiter waiter; /* watches the peer processes: for rings to other devices */
    struct ofl_waiter local;  /* no peers, only the abort word: for rings inside this process */
    volatile uint32_t *abort; /* the window's abort word: set on the first error */
    struct ofl_ce *ce;        /* this core's copy engine */
    uint8_t *bufs;            /* packet buffers for sources, OFL_BATCH x MTU */
    uint8_t *scratch;         /* zeroed bytes for queues that do not carry packets */
    int peer_gone;            /* a peer process has exited (maybe after finishing) */
    int err;                  /* first error (negative errno or OFL_E*), 0 if none */
    unsigned stop_polls;      /* ofl_core_stopping calls, to look every STOP_POLL_EVERY */
    char where[96];           /* what it was doing */
    uint64_t pkts_in, bytes_in, t_start, t_end;
};

/* Set up a core of `segment`: waiter on the peers, copy engine, buffers. */
int ofl_core_init(struct ofl_core *c, const struct ofl_args *a, struct ofl_window *w,
                  const char *segment, unsigned idx, unsigned n, int core_no, size_t bufsize);

/* Called on the core's own thread before its loop: pin it.  The core's clock starts
 * at its first progress (see ofl_core_progressed) and stops in ofl_core_end. */
void ofl_core_begin(struct ofl_core *c);

/* Called once per loop turn: waits (spin, then yield) when nothing progressed and
 * checks the peers' liveness.  A peer that exited sets c->peer_gone (it may have
 * finished normally after closing its rings: the loop decides, from the rings it
 * still reads from other devices); an abort by another process is an error. */
void ofl_core_idle(struct ofl_core *c, int progress);

/* The core moved packets: its clock starts now if this is the first time. A loop
 * calls it after each turn that progressed (a thread that runs several segments'
 * loops, for each of them: it idles on one core's waiter only). */
void ofl_core_progressed(struct ofl_core *c);

/* 1 when the process was asked to stop (SIGINT or SIGTERM pending: see stop.h), so
 * the core's sources should end as if their input had; it looks at the signals on
 * one call in STOP_POLL_EVERY (one system call), so a stop lands within that many
 * turns. */
int ofl_core_stopping(struct ofl_core *c);

/* Record the first error of this core and what it was doing, and tell every
 * process sharing the window to stop. */
void ofl_core_fail(struct ofl_core *c, int err, const char *what);

/* Called after the loop: stop the clock. */
void ofl_core_end(struct ofl_core *c);

/* Stop the core's copy engine and free its buffers. */
void ofl_core_destroy(struct ofl_core *c);

/* ---- ports by name ------------------------------------------------------------ */

/* Open the source named `name` from its options (kind=pcap|synth|udp|lso, path, loops,
 * duration_ns, rate, count, sizes, prefixes, seed); core `part` of `nparts`.
 * kind=udp reads the --udp-fd socket (udp_port.h). */
int ofl_source_open(struct ofl_src **s, const struct ofl_args *a, const char *name,
                    unsigned part, unsigned nparts, uint32_t mtu);

/* Bytes of each packet a sink writes to its capture. */
#define OFL_SINK_SNAPLEN 65535u

/* A sink: with option "<name>.kind=udp" the --udp-fd socket (each frame's UDP
 * payload goes to its IPv4/UDP destination, udp_port.h); else a pcap file when
 * option "<name>.path" is given; else a counter. */
struct ofl_sink;

/* Open sink `name` for the `ncores` cores of its segment (each writes with its
 * core index). Prints the reason and returns a negative errno on failure. */
int ofl_sink_open(struct ofl_sink **s, const struct ofl_args *a, const char *name,
                  unsigned ncores);

/* Take packet `p` from core `core` of the sink's segment. A UDP sink batches it
 * on that core's batch (the payload is copied) until ofl_sink_flush. */
void ofl_sink_write(struct ofl_sink *s, unsigned core, const struct ofl_pkt *p);

/* End of core `core`'s loop turn: send what it wrote (UDP; nothing to do else). */
void ofl_sink_flush(struct ofl_sink *s, unsigned core);

/* Send what is left, close the file and free the sink (NULL is fine). */
void ofl_sink_close(struct ofl_sink *s);

/* ---- table objects by name ---------------------------------------------------- */

struct ofl_lpm4;
struct ofl_lpm6;

/* Build the IPv4 (IPv6) LPM table named `name` from its options: path= (a prefix
 * file, text or gzip) and nports= (next hops 1..nports by the file rule, default 16).
 * Prints what it built, or the error. */
int ofl_lpm4_open_opts(struct ofl_lpm4 **t, const struct ofl_args *a, const char *name);
int ofl_lpm6_open_opts(struct ofl_lpm6 **t, const struct ofl_args *a, const char *name);

/* The host side of a table that travels: read the prefix file of table `name` (its
 * options as above) and return its IPv4 (IPv6) routes as one malloc'ed blob. */
int ofl_lpm4_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name);
int ofl_lpm6_pack(void **blob, size_t *len, const struct ofl_args *a, const char *name);

/* The device side: build the table from a blob of routes the host sent. A blob that
 * is not a whole number of routes, or holds a bad route, is -EINVAL (printed). */
int ofl_lpm4_open_blob(struct ofl_lpm4 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name);
int ofl_lpm6_open_blob(struct ofl_lpm6 **t, const void *blob, size_t len,
                       const struct ofl_args *a, const char *name);

/* Tables sent over the bulk channel "table.NAME" (host: side A; device: side B). */
typedef int (*ofl_table_pack_fn)(void **blob, size_t *len, const struct ofl_args *a,
                                 const char *name);
typedef int (*ofl_table_blob_fn)(void *t, const void *blob, size_t len,
                                 const struct ofl_args *a, const char *name);

/* Host: pack table `name` and send it: its size as a direct message, then the blob
 * as one bulk transfer (CRC32C checked by the device). Prints errors. */
int ofl_table_send(struct ofl_window *w, size_t chan_off, const char *name,
                   ofl_table_pack_fn pack, const struct ofl_args *a);

/* Device: receive table `name` from the host and build it with `open` into `*t`.
 * Prints errors (a host that failed or died is -EPIPE, not a hang). */
int ofl_table_recv(void *t, struct ofl_window *w, size_t chan_off, const char *name,
                   ofl_table_blob_fn open, const struct ofl_args *a);

/* ---- stats file -------------------------------------------------------------- */

/* Open the stats file (if --stats was given) and start the top object. */
bool ofl_stats_begin(struct ofl_json *j, const struct ofl_args *a);
/* Start a core's object and write its counters (the caller ends the object). */
void ofl_stats_core(struct ofl_json *j, const struct ofl_core *c);
void ofl_stats_qout(struct ofl_json *j, const char *queue, unsigned prod, unsigned cons,
                    const struct ofl_qout *q);
void ofl_stats_qin(struct ofl_json *j, const char *queue, unsigned prod, unsigned cons,
                   const struct ofl_qin *q);
void ofl_stats_source(struct ofl_json *j, const char *name, const struct ofl_src *s);
/* Write a table of `n` integers of `size` bytes (signed if `is_signed`). */
void ofl_stats_table(struct ofl_json *j, const char *name, const void *t, unsigned n,
                     size_t size, int is_signed);
void ofl_stats_sink(struct ofl_json *j, const char *name, const struct ofl_sink *s);
void ofl_stats_end(struct ofl_json *j);

#endif
