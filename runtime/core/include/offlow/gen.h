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
#include "offlow/ticks.h"
#include "offlow/wait.h"
#include "offlow/window.h"

#include "offlow/body.h" /* the element body macros */

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

/* Never defined: REPLY calls it only where its size is a constant above
 * OFL_CHAN_MSG_MAX, which makes the handler's compile fail at the REPLY's line. */
void ofl_reply_too_long_(void)
    __attribute__((error("REPLY of more than 56 bytes (OFL_CHAN_MSG_MAX): answer with "
                         "BULK_REPLY(p, n), which takes any size")));

/* In a channel handler: answer the message with `n` bytes at `p` (at most 56: a size
 * known to be more is a compile error; one found more while it runs fails the handler,
 * -EMSGSIZE; the manager delivers it when the host receives). An error ends the
 * handler, and the manager closes the channel saying why (ofl_chan_close_why: the
 * host's call on it fails with that reason). (A handler body may also end early with
 * `return;`.) */
#define REPLY(p, n)                                                             \
    do {                                                                        \
        if (__builtin_constant_p(n) && (n) > OFL_CHAN_MSG_MAX)                  \
            ofl_reply_too_long_();                                              \
        OFL_HANDLER_TRY_(ofl_chan_post(ofl_end_, (p), (n)));                    \
    } while (0)

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

/* ---- element timing ------------------------------------------------------- */

/* Element timing, in calibration builds only (-DOFL_ELEMENT_TIME, offlow.planner):
 * the ticks an element's body (or a sink's write) takes, added to its counter. In
 * other builds they are nothing. */
/* A timed region longer than this (about 0.1 to 0.5 ms) was preempted: it is left out. */
#define OFL_ETIME_MAX_TICKS 1000000u
#ifdef OFL_ELEMENT_TIME
/* The signal fences keep the compiler from moving the body's work across the reads
 * of the counter (it may otherwise sink a loop whose result is only stored). */
#define OFL_ETIME_BEGIN()                                                       \
    const uint64_t ofl_t0_ = ofl_ticks();                                       \
    __atomic_signal_fence(__ATOMIC_SEQ_CST)
/* `kind`: the element's kind of work (OFL_WORK_*), for profile-scaled emulation. */
#define OFL_ETIME_END(acc, kind)                                                \
    do {                                                                        \
        __atomic_signal_fence(__ATOMIC_SEQ_CST);                                \
        const uint64_t ofl_dt_ = ofl_ticks() - ofl_t0_;                         \
        if (ofl_dt_ < OFL_ETIME_MAX_TICKS) {                                    \
            /* the body's work: the region less the counter's own read */       \
            const uint64_t ofl_w_ = ofl_dt_ > ctx->core.timer_ticks             \
                                        ? ofl_dt_ - ctx->core.timer_ticks : 0;  \
            (acc) += ofl_dt_;                                                   \
            ctx->core.turn_timed += ofl_dt_;                                    \
            ctx->core.turn_regions++;                                           \
            if ((kind) != OFL_WORK_WIRE) ctx->core.dilate_work += ofl_w_;       \
            ctx->core.dilate_extra += (double)ofl_w_ * ctx->core.dilate_kind[kind]; \
        }                                                                       \
    } while (0)
#else
#define OFL_ETIME_BEGIN() ((void)0)
#define OFL_ETIME_END(acc, kind) ((void)0)
#endif

/* Kinds of work (offlow.ir.graph.WORK_KINDS, in that order). */
enum { OFL_WORK_INTEGER = 0, OFL_WORK_LOOKUP = 1, OFL_WORK_HASH = 2, OFL_WORK_KINDS = 3,
       OFL_WORK_WIRE = 3 /* a source's reading: the wire's work, never slowed */ };

/* ---- options -------------------------------------------------------------- */

#define OFL_MAX_OPTS 512   /* --opt NAME.KEY=VALUE a process takes (sources, sinks, tables) */

struct ofl_args;

/* A kind of packet source that a library adds to the core's (pcap, synth, udp): the lso
 * library's "lso" reads a send port. `open` opens source `name` with the common options
 * in `o` (ofl_source_open reads them) and its own (ofl_args_get); it writes why it
 * failed to `errbuf` (256 bytes), or says it itself (ofl_start_failf). */
struct ofl_port_sink;
struct ofl_src_kind {
    const char *name;
    int (*open)(struct ofl_src **s, const struct ofl_args *a, const char *name,
                const struct ofl_src_opts *o, char *errbuf);
    /* A sink of the same kind (a port: "dpdk"), or NULL: opens sink `name` for the
     * `ncores` cores of its segment, as `open`. */
    int (*sink_open)(struct ofl_port_sink **k, const struct ofl_args *a, const char *name,
                     unsigned ncores, char *errbuf);
};

/* A sink that writes to a port (kinds afpacket and those of struct ofl_src_kind): the
 * core's sink calls it through these ops; a kind's struct starts with `ops`. */
struct ofl_port_sink_ops {
    /* take packet `p` from core `core` (copied; may wait in that core's batch) */
    void (*write)(struct ofl_port_sink *k, unsigned core, const struct ofl_pkt *p);
    /* send what core `core` wrote */
    void (*flush)(struct ofl_port_sink *k, unsigned core);
    /* packets the port refused (its queue full, longer than it takes) */
    uint64_t (*dropped)(const struct ofl_port_sink *k);
    /* send what is left and free it */
    void (*close)(struct ofl_port_sink *k);
    /* take packets `p[0..n)` from core `core`, as `write` each in turn (checks once a
     * burst, not once a packet); NULL: the core's sink calls `write` for each */
    void (*write_burst)(struct ofl_port_sink *k, unsigned core,
                        struct ofl_pkt *const *p, uint32_t n);
};
struct ofl_port_sink {
    const struct ofl_port_sink_ops *ops;
};

#define OFL_OPT_ASKED_MAX 4096   /* bytes of the NAME.KEY asked for, kept for messages */

/* What a process's code asked of its options (ofl_args_get): an option the user gave
 * that nothing asked for is a misspelt or misplaced key (ofl_args_check_unread). */
struct ofl_opt_use {
    bool asked[OFL_MAX_OPTS];        /* option i's NAME.KEY was asked for */
    char keys[OFL_OPT_ASKED_MAX];    /* each NAME.KEY asked for, once, each ended by NUL */
    size_t len;                      /* bytes of keys in use */
};

/* Options of one device process, from its command line. */
struct ofl_args {
    const char *device;       /* the device's name: "host", "nic" (for messages) */
    const char *window;       /* --window PATH */
    const char *stats;        /* --stats PATH (NULL: no stats file) */
    bool init;                /* --init: create and format the window, then exit */
    bool serve;               /* --serve: after the packets, serve channels until stopped */
    const char *reload;       /* --reload PATH: serve the reload channel (offlow reload);
                                 PATH, the run's description, goes with the window */
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
    bool opt_user[OFL_MAX_OPTS];  /* given as --user-opt: the user's own (offlow run --opt) */
    struct ofl_opt_use *use;      /* where ofl_args_get records what it was asked (the
                                     process's main sets it), or NULL: not recorded */
    const struct ofl_src_kind *src_kinds; /* the libraries' source kinds, up to one with a
                                            NULL name (set by main; NULL: none) */
};

/* Parse argv into `a`; prints a message and returns -EINVAL on a bad option.
 * With --udp-fd it also blocks SIGINT and SIGTERM (ofl_stop_signals_block): call it
 * before starting any thread. */
int ofl_args_parse(struct ofl_args *a, int argc, char **argv, const char *device);

/* Value of option "<name>.<key>", or `dflt` when absent (the last one given wins).
 * Recorded in a->use when set. */
const char *ofl_args_get(const struct ofl_args *a, const char *name, const char *key,
                         const char *dflt);

/* Value of option "<name>.<key>" that the runner gave the process itself (a socket's
 * fd: never the user's --opt), or `dflt`: not recorded as asked, so that a user's
 * --opt NAME.KEY is refused as unread (ofl_args_check_unread) rather than taken. */
const char *ofl_args_get_own(const struct ofl_args *a, const char *name, const char *key,
                             const char *dflt);

/* Say why this process fails before its first packet (its set-up: a bad option, a
 * file or table that does not open), printf-style: the run's one error for it. Written
 * to STATS.error (a->stats + ".error", which the runner reads: offlow.targets.base), or
 * to stderr as "offlow DEVICE: TEXT" when there is no stats file or it cannot be made.
 * The first one said is kept: a later call (a consequence of the first) leaves
 * STATS.error as it is and says nothing. TEXT names no device (the same bad option read
 * by two processes is then one error) and ends with no newline. The caller still
 * returns its error (a negative errno) and the process exits non-zero. */
void ofl_start_failf(const struct ofl_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The keys asked of `name`'s options (ofl_args_get) in this process, each ended by a
 * NUL, written to `buf` (`cap` bytes) as far as they fit whole. Returns the bytes
 * written (0 when a->use is NULL: nothing recorded). A table's sender passes them to
 * the process that holds it (ofl_table_send). */
size_t ofl_args_asked(const struct ofl_args *a, const char *name, char *buf, size_t cap);

/* After `name` (a table, source or sink, said by `what`) was opened with `a`: an option the
 * user gave it (--user-opt NAME.KEY=VALUE) that nothing asked for is refused with one
 * message naming the keys that were asked for (ofl_start_failf). Returns 0, or -EINVAL;
 * 0 when a->use is NULL (nothing recorded). */
int ofl_args_check_unread(const struct ofl_args *a, const char *what, const char *name);

/* Print "offlow: <msg>" to stderr (a failure with no stats file to say it in, or after
 * the run: ofl_start_failf says a failure before the first packet); returns 1 (an exit
 * status). */
int ofl_fatal(const char *msg);

/* Like ofl_fatal, with the runtime's text for error `err`. */
int ofl_fatal_err(const char *msg, int err);

/* Open the window created by --init and check its size; says errors (ofl_start_failf). */
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

/* The most rings a core sends to other processes through the link throttle. */
#define OFL_LINK_MAX 16

/* One thread running one segment on one core. */
struct ofl_core {
    const char *device;
    const char *segment;
    unsigned idx, n;          /* this core's index in the segment, and how many */
    int cpu;                  /* the CPU it is pinned to */
    int oversubscribed;
    struct ofl_waiter waiter; /* watches the peer processes: for rings to other devices */
    struct ofl_waiter local;  /* no peers, only the abort word: for rings inside this process */
    struct ofl_waiter peer[OFL_WAIT_MAX_PEERS]; /* peer[i] watches the i-th peer alone: for
                                 the rings to its process (another that finished and
                                 left must not fail them) */
    volatile uint32_t *abort; /* the window's abort word: set on the first error */
    struct ofl_ce *ce;        /* this core's copy engine */
    uint8_t *bufs;            /* packet buffers for sources, OFL_BATCH x MTU */
    uint8_t *scratch;         /* zeroed bytes for queues that do not carry packets */
    int peer_gone;            /* peer processes that have exited (maybe after finishing):
                                 bit i is the i-th --peer-fd; 0 while none has */
    int err;                  /* first error (negative errno or OFL_E*), 0 if none */
    unsigned stop_polls;      /* ofl_core_stopping calls, to look every STOP_POLL_EVERY */
    char *where;              /* what it was doing (its own copy, never cut: queue and
                                 element names are the user's), NULL until it fails */
    uint64_t pkts_in, bytes_in, t_start, t_end;
    uint64_t tick_start, tick_end; /* ofl_ticks() beside t_start and t_end */
    uint64_t cpu_start, cpu_end;   /* the thread's CPU time (ns) beside them */
    uint64_t turn0_ns, turn0_tick, turn0_cpu; /* the start of each turn until the clock
                                 starts: the first turn that moves packets starts it */
    uint64_t timer_ticks;     /* the ticks an empty timed region takes (the median of
                                 64: element timing's own cost, one read of the
                                 counter; each timed region costs two, one inside it and
                                 one outside: neither is slowed nor counted as loop) */
    /* Profile-scaled emulation (offlow run --profile, in element timing builds; options
     * dilate.integer, .lookup, .hash: how many times slower than here each kind of work
     * runs): at the end of each turn the core spins for dilate_kind[k] (that kind's
     * factor less one) times the time its elements spent on work of kind k in the turn,
     * and its loop and rings (the turn's time by the counter outside the timed regions,
     * the waits and the copies: loop_ticks; a preempted turn's loop taken at the mean)
     * as integer work. Its waits are not slowed, nor are the copy engine's copies
     * between its rings and its buffers (copy_ticks: the emulated DMA engine, whose rate
     * the link throttle emulates; this host's cross-core cost of a copy, amplified by a
     * slow profile's factor, once decided the NIC's stage). The time of the turns that
     * moved packets, less their waits on full rings and for the group (and a preempted
     * loop's excess), plus the copies and the spins asked for, is counted: busy_cpu_ns,
     * the CPU time the turns took, what the planner's validation measures; waited_ns:
     * the waits. */
    bool dilating;
    double dilate_kind[OFL_WORK_KINDS + 1], dilate_extra;  /* [OFL_WORK_WIRE]: 0 */
    uint64_t dilate_work, busy_ticks, dilated_ticks;
    uint64_t asked_ticks;  /* the spins asked for (dilated_ticks: what they ran, as long
                              or longer: a preempted spin runs on until its end) */
    uint64_t turn_tick, busy_cpu_ns; /* the turns that moved packets: their own time */
    uint64_t turn_wall, busy_wall_ns; /* the same turns' wall time, less their waits: the
                                         CPU time and the time kept from a CPU meanwhile */
    uint64_t turn_waited, waited_ns; /* waits (peer[], local) at the turn's start; in all */
    uint64_t turn_timed, loop_ticks; /* the turn's timed ticks (all kinds); loops in all */
    uint64_t turn_regions;           /* the turn's timed regions (each reads the counter
                                        twice: one read's cost falls outside it) */
    uint64_t loop_turns;             /* the turns counted in loop_ticks */
    uint64_t turn_copy0, copy_ticks; /* the copy engine's ticks in this thread (ce's
                                        copy_ticks) at the turn's start; in all: the
                                        emulated DMA's work, counted busy, never slowed */
    double ticks_per_ns;             /* ofl_ticks() per ns, measured at the start */
    /* The link throttle (options link.gbps and link.dma_gbps, profile-scaled runs): the
     * bytes this core's rings send to other processes pass two token buckets shared
     * with the other cores (the window's struct ofl_window_link): its process's
     * direction of the link at gbps, and the DMA engine of both directions at dma_gbps;
     * the core spins while either is more than OFL_LINK_DEPTH_NS behind. The link's
     * latency (link.latency_us): each doorbell of those rings reaches the other process
     * that long after its commit (ofl_ring_set_delay; the core publishes the due ones
     * at every turn, and does not nap while it holds some). */
    double link_gbps, dma_gbps;      /* 0: not throttled */
    uint64_t link_delay_ns;          /* 0: no latency */
    struct ofl_window_link *link;    /* in the window */
    int link_dir;                    /* 0: the device's direction, 1: the host's */
    struct ofl_qout *link_out[OFL_LINK_MAX];
    unsigned nlink;
    uint64_t link_sent, throttled_ns;
};

/* Start a turn (profile-scaled emulation; nothing when not dilating). */
void ofl_dilate_begin(struct ofl_core *c);

/* End a turn: one that moved packets is stretched by spinning (profile-scaled
 * emulation; nothing when not dilating). */
void ofl_dilate_end(struct ofl_core *c, int progress);

/* Set up a core of `segment`: waiter on the peers, copy engine, buffers. On failure
 * nothing is left allocated (ofl_core_destroy is still safe to call). */
int ofl_core_init(struct ofl_core *c, const struct ofl_args *a, struct ofl_window *w,
                  const char *segment, unsigned idx, unsigned n, int core_no, size_t bufsize);

/* Called on the core's own thread before its loop: pin it.  The core's clock starts
 * at the start of its first turn that makes progress (see ofl_core_progressed) and
 * stops in ofl_core_end. */
void ofl_core_begin(struct ofl_core *c);

/* Have every waiter of `c` run `fn(arg)` while a ring of it is full (see struct
 * ofl_waiter's assist): a thread that runs several segments' loops sets it. */
void ofl_core_assist(struct ofl_core *c, int (*fn)(void *arg), void *arg);

/* Called once per loop turn: waits (spin, then yield) when nothing progressed and
 * checks the peers' liveness.  A peer that exited sets c->peer_gone (it may have
 * finished normally after closing its rings: the loop decides, from the rings it
 * still reads from other devices); an abort by another process is an error. */
void ofl_core_idle(struct ofl_core *c, int progress);

/* The core moved packets: if this is the first time, its clock starts, from the
 * start of the turn that moved them (ofl_dilate_begin noted it; now where no turn
 * was begun). A loop calls it after each turn that progressed (a thread that runs
 * several segments' loops, for each of them: it idles on one core's waiter only). */
void ofl_core_progressed(struct ofl_core *c);

/* 1 when the process was asked to stop (SIGINT or SIGTERM pending: see stop.h), so
 * the core's sources should end as if their input had; it looks at the signals on
 * one call in STOP_POLL_EVERY (one system call), so a stop lands within that many
 * turns. */
int ofl_core_stopping(struct ofl_core *c);

/* Record the first error of this core and what it was doing, and tell every
 * process sharing the window to stop. */
void ofl_core_fail(struct ofl_core *c, int err, const char *what);

/* ofl_core_fail with what it was doing formatted (printf's `fmt`), whole. */
void ofl_core_failf(struct ofl_core *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ofl_core_failf for an element's FAIL: "element NAME: " and the text, the error
 * OFL_EFAIL. */
void ofl_core_fail_element(struct ofl_core *c, const char *element, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The body macros' FAIL and FAIL_AT (body.h): a body function's prologue names its
 * element in ofl_element_ and, where it may FAIL, its counters' indices (OFL_EL_, the
 * element's; OFL_FAILED_WHY_, its reason `failed`'s). The core's first FAIL says where
 * the packets it still held are counted (ctx->held_el, held_why); every FAIL counts in
 * ctx->fails, which the generated loops test to run no further packet (codegen/c.py). */
#define OFL_FAIL_(...)                                                                  \
    (ofl_core_fail_element(&ctx->core, ofl_element_, __VA_ARGS__),                      \
     ctx->fails++ ? (void)0 : (void)(ctx->held_el = OFL_EL_, ctx->held_why = OFL_FAILED_WHY_))

/* A batch body's mask for a packet its core held when it FAILed: dropped unrun (no
 * body macro sets all three bits). */
#define OFL_HELD (OFL_DECIDED | OFL_CONSUMED | OFL_WHY)

/* After a batch body over `n` packets FAILed (FAIL_AT): every packet after the first
 * whose mask is `failed` (the element's own FAIL_AT mask) is held (OFL_HELD). */
static inline void ofl_hold_after_fail(uint32_t *masks, uint32_t n, uint32_t failed)
{
    uint32_t j = 0;
    while (j < n && masks[j] != failed) j++;
    for (j++; j < n; j++) masks[j] = OFL_HELD;
}

/* Where a batch body over `n` packets FAILed: the first packet whose mask is `failed`
 * (the element's own FAIL_AT mask), or 0 where none is (the body decided otherwise
 * after FAIL_AT: its first packet is taken as the failing one). */
static inline uint32_t ofl_fail_index(const uint32_t *masks, uint32_t n, uint32_t failed)
{
    for (uint32_t j = 0; j < n; j++)
        if (masks[j] == failed) return j;
    return 0;
}

/* A flush of several vector elements: `order` holds, for each of the `count` packets
 * waiting, in arrival order, the vector element it waits at. The arrival position of
 * the `j`th packet waiting at element `v` (count where there is none). */
static inline uint32_t ofl_vorder_pos(const uint8_t *order, uint32_t count, uint8_t v,
                                      uint32_t j)
{
    for (uint32_t k = 0; k < count; k++)
        if (order[k] == v && j-- == 0) return k;
    return count;
}

/* How many of the first `upto` packets to arrive (of `order`, as above) wait at
 * element `v`. */
static inline uint32_t ofl_vorder_before(const uint8_t *order, uint32_t upto, uint8_t v)
{
    uint32_t m = 0;
    for (uint32_t k = 0; k < upto; k++) m += order[k] == v;
    return m;
}

/* Whether `err` only says that the core stopped because of another's failure (the
 * abort word: -ECANCELED; a ring its consumer broke: OFL_RING_EBROKEN): the failure
 * that caused it is said where it happened, so this one is not said again. */
bool ofl_core_err_secondary(int err);

/* Called after the loop: stop the clock; say the core's error on stderr, unless it is
 * secondary (ofl_core_err_secondary: the stats file has it, marked so). */
void ofl_core_end(struct ofl_core *c);

/* Stop the core's copy engine and free its buffers and its error's text (a core
 * that failed: ofl_core_fail). */
void ofl_core_destroy(struct ofl_core *c);

/* ---- ports by name ------------------------------------------------------------ */

/* Open the source named `name` from its options (kind=pcap|synth|udp or one of
 * a->src_kinds, path, loops, duration_ns, rate, count, sizes, prefixes, seed); core
 * `part` of `nparts`. kind=udp reads the --udp-fd socket (udp_port.h). Says the reason
 * (ofl_start_failf) and returns a negative errno on failure. */
int ofl_source_open(struct ofl_src **s, const struct ofl_args *a, const char *name,
                    unsigned part, unsigned nparts, uint32_t mtu);

/* Bytes of each packet a sink writes to its capture. */
#define OFL_SINK_SNAPLEN 65535u

/* A sink: with option "<name>.kind=udp" the --udp-fd socket (each frame's UDP
 * payload goes to its IPv4/UDP destination, udp_port.h); else a pcap file when
 * option "<name>.path" is given; else a counter. */
struct ofl_sink;

/* Open sink `name` for the `ncores` cores of its segment (each writes with its
 * core index). Says the reason (ofl_start_failf) and returns a negative errno on
 * failure. */
int ofl_sink_open(struct ofl_sink **s, const struct ofl_args *a, const char *name,
                  unsigned ncores);

/* Take packet `p` from core `core` of the sink's segment. A UDP sink batches it
 * on that core's batch (the payload is copied) until ofl_sink_flush. */
void ofl_sink_write(struct ofl_sink *s, unsigned core, const struct ofl_pkt *p);

/* Take packets `p[0..n)` from core `core`, in that order: as ofl_sink_write of each,
 * counted once (a segment's source batch, gathered at its sink: offlow.codegen.c). */
void ofl_sink_write_burst(struct ofl_sink *s, unsigned core, struct ofl_pkt *const *p,
                          uint32_t n);

/* End of core `core`'s loop turn: send what it wrote (UDP; nothing to do else). */
void ofl_sink_flush(struct ofl_sink *s, unsigned core);

/* Send what is left, close the file and free the sink (NULL is fine). */
void ofl_sink_close(struct ofl_sink *s);

/* ---- table objects by name ---------------------------------------------------- */

/* Tables sent over the bulk channel "table.NAME" (host: side A; device: side B): each
 * says its errors (ofl_start_failf). */
typedef int (*ofl_table_pack_fn)(void **blob, size_t *len, const struct ofl_args *a,
                                 const char *name);
typedef int (*ofl_table_blob_fn)(void *t, const void *blob, size_t len,
                                 const struct ofl_args *a, const char *name);

/* Host: pack table `name` and send it: its size and that of the keys `pack` asked of
 * its options (ofl_args_asked) as a direct message, then the blob and the keys, each
 * one bulk transfer (CRC32C checked by the device). Says its errors (ofl_start_failf),
 * but not a device that stopped first (-EPIPE, -ECANCELED, -ECONNABORTED: its failure
 * is the run's error). */
int ofl_table_send(struct ofl_window *w, size_t chan_off, const char *name,
                   ofl_table_pack_fn pack, const struct ofl_args *a);

/* Device: receive table `name` from the host and build it with `open` into `*t`; the
 * keys the host's `pack` asked of the table's options count as asked here too (each
 * ofl_args_get), so that ofl_prog_open refuses only a key neither process read.
 * Says its errors (ofl_start_failf), but not a host that failed or died first (-EPIPE,
 * not a hang; or -ECANCELED, -ECONNABORTED: the host's failure is the run's error). */
int ofl_table_recv(void *t, struct ofl_window *w, size_t chan_off, const char *name,
                   ofl_table_blob_fn open, const struct ofl_args *a);

/* ---- the program's descriptor ------------------------------------------------ */

/* A generated main describes its device's part of the program in tables of the types
 * below (address constants into its own static state) and hands them to
 * ofl_prog_open, ofl_prog_run, ofl_prog_report and ofl_prog_close, which set up,
 * run, report and tear down every segment core of the process. */

/* One ring of the window: entry size, entries, doorbell batch, and where the packet
 * bytes start in an entry (0: fixed-size entries, always copied whole). */
struct ofl_ring_spec {
    uint32_t entry_size, size, batch, data_off;
};

/* --init: create the window `a->window` of `wsize` bytes, format the `n` rings of
 * `rings` at offsets `ring_off`, create the `nchan` channels named `names` in the
 * channel region at `chan_off` (none when nchan is 0), record the runner, close the
 * window. Returns the process's exit status: 0, or 1 (printed). */
int ofl_prog_init_window(struct ofl_window *w, const struct ofl_args *a, size_t wsize,
                         const struct ofl_ring_spec *rings, unsigned n, const size_t *ring_off,
                         size_t chan_off, unsigned nchan, const char *const *names);

/* One ring a segment core pushes to or polls: its index among the window's rings,
 * the producer core, instance and consumer core it connects. */
struct ofl_ring_use {
    unsigned ring, prod, inst, cons;
    bool fail_full;           /* producer: its consumer runs in this thread, so a full
                                 ring fails (ofl_qout.fail_full) instead of waiting */
};

/* The rings of one logical queue that one segment core pushes to (`out` set) or
 * polls (`in` and `nin` set): where the core keeps their ends, and which they are. */
struct ofl_qside {
    const char *queue;
    struct ofl_qout **out;    /* the core's array of producer ends, or NULL */
    struct ofl_qin **in;      /* the core's array of consumer ends, or NULL */
    unsigned *nin;            /* how many of them it polls (an input) */
    const struct ofl_ring_use *rings;
    unsigned n;
    bool local;               /* the other side is in this process: a peer process
                                 that exits must not fail its rings */
    bool drop_full;           /* output: a full ring drops the entry (enqueue=drop) */
    int peer;                 /* the other side's process: its index among the --peer-fd
                                 options (-1: unknown, any peer's exit counts) */
};

/* A source of a segment core, by name, and where the core keeps it. */
struct ofl_src_use {
    const char *name;
    struct ofl_src **src;
};

/* Per-element counters of one segment core, indexed like ofl_prog.el_names (`why`:
 * per element and drop reason, from ofl_prog.why_base); `ch_in`, `ch_bytes`: the
 * packets and bytes it took from each channel of the queues into this device, indexed
 * like ofl_prog.ch_queue (NULL: none counted). */
struct ofl_el_counts {
    uint64_t *in, *drop, *used, *copies, *made, *why, *ch_in, *ch_bytes;
    uint64_t *ticks;          /* time in its body (OFL_ELEMENT_TIME builds), else zeros */
};

/* One segment core: its ofl_core, what it runs and counts, its rings and sources. */
struct ofl_core_use {
    struct ofl_core *core;
    const char *segment;
    unsigned idx, n;          /* its index in the segment's cores, and how many */
    int core_no;              /* the device core it runs on */
    struct ofl_el_counts el;
    const struct ofl_qside *queues;  /* its outputs first, then its inputs */
    unsigned nqueues;
    const struct ofl_src_use *sources;
    unsigned nsources;
};

/* A sink, by name, where the process keeps it, and the cores of its segment. */
struct ofl_sink_use {
    const char *name;
    struct ofl_sink **sink;
    unsigned ncores;
};

struct ofl_ctl_stage;

/* A table this process reports or frees (generated one-line functions). */
struct ofl_table_use {
    const char *name;
    /* its stats, or NULL; `contents`: a shared array's every element, else only its
       length (ofl_stats_table_length); a table object's stats are written either way */
    void (*stats)(struct ofl_json *j, const char *name, bool contents);
    void (*close)(void);      /* frees it (a table of this device), or NULL */
    bool opts;                /* an object opened here from its options (NAME.KEY, and
                                 those its sender read: ofl_table_recv): a user's key
                                 that none of them read is refused (ofl_prog_open) */
    /* the staging of its control channel when this process serves it in parts
       (ctl_stage.h), else NULL: its dropped requests are reported (ctl_dropped) */
    const struct ofl_ctl_stage *ctl;
};

/* A thread of the process: the function running its loop(s), and its argument. */
struct ofl_thread_use {
    void *(*fn)(void *);
    void *arg;
};

/* A device's part of the program. */
struct ofl_prog {
    const char *const *el_names;   /* its elements, NULL-terminated */
    const unsigned *why_n;         /* per element: its drop reasons */
    const unsigned *why_base;      /* per element: its first reason in why_names */
    const char *const *why_names;
    const char *const *ch_queue;   /* the channels of the queues into this device: the
                                      queue of each (NULL-terminated; NULL: none) ... */
    const unsigned *ch_index;      /* ... and its channel number in that queue */
    const struct ofl_ring_spec *rings;  /* every ring of the window */
    const struct ofl_core_use *cores;
    unsigned ncores;
    const struct ofl_sink_use *sinks;
    unsigned nsinks;
    const struct ofl_table_use *tables;
    unsigned ntables;
    const struct ofl_thread_use *threads;
    unsigned nthreads;
    bool instances;           /* report each producer ring's mapping ("instances") */
    uint32_t mtu;             /* the largest frame */
    size_t bufsize;           /* each core's packet buffers: batch x mtu */
};

/* Open the sinks, then for each core: its ofl_core, its sources, the ends of its
 * output and input rings (at `ring_off` in window `w`). A user's option that the
 * table (one with `opts`, opened before), source or sink it names never read is
 * refused (ofl_args_check_unread), the tables first. Says the reason
 * (ofl_start_failf) and returns a negative errno on failure, after ofl_prog_fail (every
 * process stops; what was opened stays for the exit). */
int ofl_prog_open(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_window *w,
                  const size_t *ring_off);

/* This process failed before its first packet (its reason said: ofl_start_failf):
 * every ring it would consume (at `ring_off` in window `w`) is marked broken by its
 * consumer, so that its producer counts what it published there and no one will take
 * (ring_broken), and the window is aborted: every process stops. A ring whose producer
 * had already finished and closed it keeps its mark: what it holds, never taken, is
 * written to STATS.untaken (`a->stats` + ".untaken": {"device", "untaken": [the ring's
 * consumer-side counters, as in the stats file, "lost" what it holds]}), which the
 * runner counts as that queue's ring_broken drops. */
void ofl_prog_fail(const struct ofl_prog *p, const struct ofl_args *a, struct ofl_window *w,
                   const size_t *ring_off);

/* Start every thread and wait for all of them; a core that failed aborts the window
 * (every process stops). Returns 1 when a core failed or a thread could not start
 * (printed), else 0. */
int ofl_prog_run(const struct ofl_prog *p, struct ofl_window *w);

/* Write the stats file (--stats): per core its counters, elements, rings (and their
 * mapping) and sources; the tables; the sinks; and `chan_withdrawn` when not 0: the
 * answers the process's channel ends posted that their peers never took (withdrawn
 * at a close: ofl_chan_mgr_stop_sum). Nothing without --stats. */
void ofl_prog_report(const struct ofl_prog *p, const struct ofl_args *a,
                     uint64_t chan_withdrawn);

/* While the cores run: write the same counters to the stats file's live copy,
 * answering request `seq` (live.h); `final`: the process is about to exit and no
 * request will be answered any more (these counts are the last). The shared arrays'
 * elements only when `seq` has OFL_LIVE_TABLES or `final`; else each array's length
 * (ofl_stats_table_length). The file, its header members and its errors: live_file.h,
 * ofl_live_write. Nothing without --stats. */
int ofl_prog_report_live(const struct ofl_prog *p, const struct ofl_args *a, uint32_t seq,
                         bool final);

/* At exit, once no core runs and no channel is served: the last counts, serialized
 * once and written to both places (ofl_stats_write_last): the stats file, as
 * ofl_prog_report writes it, and its last live copy (live_final: every table's
 * contents, and `chan_withdrawn` as the stats file has it). A 4M-entry array was
 * serialized twice here. Nothing without --stats. */
void ofl_prog_report_last(const struct ofl_prog *p, const struct ofl_args *a,
                          uint64_t chan_withdrawn);

/* Close the sinks, then each core's sources, rings and buffers, then the tables. */
void ofl_prog_close(const struct ofl_prog *p);

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
/* Write a table of `n` entries without them: {"kind": "array", "length": n} (a live
 * answer that did not ask for the contents). */
void ofl_stats_table_length(struct ofl_json *j, const char *name, unsigned n);
void ofl_stats_sink(struct ofl_json *j, const char *name, const struct ofl_sink *s);
void ofl_stats_end(struct ofl_json *j);
/* A process's last counts: `body` (the members after "device", ofl_live_body_fn)
 * serialized once into memory, then the same bytes written to the last live copy
 * (live_file.h: live_final, request 0) and to the stats file (ofl_stats_begin/end).
 * Without memory for them, body writes each in turn instead. Nothing without --stats;
 * the live copy's failure is printed (the stats file's, as ofl_stats_begin's). */
void ofl_stats_write_last(const struct ofl_args *a,
                          void (*body)(struct ofl_json *j, const void *arg), const void *arg);

#endif
