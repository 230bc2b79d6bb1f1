/* Channels: the region layout and the pieces chan.c, chan_bulk.c and chan_mgr.c
 * share. Not a public header.
 *
 * Region: a header line, then `nchan` control blocks, then (page aligned) a
 * staging ring of stage_size bytes per channel (chan_stage_size: a power of two).
 *
 * Control block of one channel:
 *   meta line      state (FREE/READY) and name; written under the region's lock
 *   line[2]        each side's message line: an 8-byte header word and 56 bytes of
 *                  payload. The header holds the side's message sequence number,
 *                  its acknowledgement of the other side's sequence number, the
 *                  payload length and the message kind.
 *   side[2]        per side: an identity line (owner pid, open generation, flags)
 *                  and a bulk status line per direction (progress of the current
 *                  transfer, per-chunk CRCs and copy paths); written by that side.
 *   sg[]           side A's scatter-gather area: the entries of the chunk it posted.
 *
 * Direct messages (see chan.c): side S has message s pending while S.seq differs
 * from R.claim, the receiver's claim word. Taking (the receiver) and withdrawing (a
 * sender that gives up) are one CAS each on that word, so exactly one of them wins.
 * The ack field of R's header publishes R.claim to the sender: R writes it with its
 * next header write (its next message, so that a reply carries the acknowledgement
 * of the request: one line transfer each way), at the start of its next receive, or
 * at once for bulk chunks; a withdrawing sender moves it too. A sender reads the
 * claim word itself only when the published ack lags (rarely: see chan.c). The
 * claim word and the header are the only words both sides write, always with CAS. */
#ifndef OFL_CHAN_INT_H
#define OFL_CHAN_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "offlow/chan.h"
#include "offlow/wait.h"

#define CHAN_MAGIC 0x314e4148434c464full /* "OFLCHAN1" little-endian */
#define CHAN_VERSION 3u
#define CHAN_MAX_CHANNELS (1u << 20)
#define CHAN_PAGE 4096u
/* An SG entry covers at most one segment: the pages of the buffer up to the next
 * 16 KB boundary (contiguous pages merged, as a Linux scatterlist entry merges
 * them), so K = 6 entries describe up to 96 KB. Larger chunks amortize each chunk's
 * hand-off; the sender's CRC runs beside the copy (see chan_bulk.c), so they cost
 * no pipeline fill. */
#define CHAN_SEG (4u * CHAN_PAGE)

/* ---- line header word: seq:24 | ack:24 | len:8 | kind:8 ---- */
#define SEQ_MASK 0xFFFFFFu

enum { KIND_NONE = 0, KIND_MSG = 1, KIND_BEGIN = 2, KIND_CHUNK = 3 };

static inline uint32_t h_seq(uint64_t h) { return (uint32_t)h & SEQ_MASK; }
static inline uint32_t h_ack(uint64_t h) { return (uint32_t)(h >> 24) & SEQ_MASK; }
static inline unsigned h_len(uint64_t h) { return (unsigned)(h >> 48) & 0xFFu; }
static inline unsigned h_kind(uint64_t h) { return (unsigned)(h >> 56); }
static inline uint64_t h_make(uint32_t seq, uint32_t ack, unsigned len, unsigned kind)
{
    return (uint64_t)(seq & SEQ_MASK) | (uint64_t)(ack & SEQ_MASK) << 24 |
           (uint64_t)(len & 0xFFu) << 48 | (uint64_t)(kind & 0xFFu) << 56;
}

struct chan_line {
    uint64_t hdr;
    uint8_t payload[OFL_CHAN_MSG_MAX];
};
_Static_assert(sizeof(struct chan_line) == 64, "a message line is one cache line");

/* One scatter-gather entry: `len` bytes at `addr` in side A's address space. */
struct chan_sg {
    uint64_t addr;
    uint64_t len;
};

/* Side flags: the copy path an end asked for with ofl_chan_set_copy (BOUNCE also
 * when side B finds process_vm_* refused); either side's request binds both. */
enum { SIDE_WANT_BOUNCE = 1u, SIDE_WANT_VM = 2u };

/* Chunks of one bulk transfer in flight at most: the sender's CRC slots and the
 * per-chunk arrays below, chunk c at [c % CHAN_INFLIGHT]. */
#define CHAN_INFLIGHT 4u

/* Bulk status of one direction (dir 0: A -> B, dir 1: B -> A) on one side. `prog`
 * packs the transfer id, its error (positive errno, 0 while fine) and a chunk
 * count (B: chunks copied and acknowledged; A: chunks verified when receiving),
 * so one load gives a consistent view; the other fields are written before it. */
struct chan_bulk_st {
    _Alignas(64) uint64_t prog;    /* xfer << 32 | errno << 24 | count */
    uint64_t done;                 /* bytes acknowledged */
    uint64_t outstanding;          /* bytes still to move */
    uint64_t expected;             /* on -EMSGSIZE: the size this side expected */
    uint64_t copying;              /* B: xfer << 32 | chunk + 1 while it copies A's memory */
    uint32_t crc[CHAN_INFLIGHT];   /* the sender: running CRC32C after chunk c (slot c)
                                      (A sending: published for chunks 0..count-1) */
    uint8_t path[CHAN_INFLIGHT];   /* B: OFL_CHAN_PATH_* of chunk c (slot c) */
    uint8_t pad_[128 - 60];        /* the next hot line 128 bytes on */
};
_Static_assert(offsetof(struct chan_bulk_st, pad_) <= 64, "bulk status is one line");

#define PROG_COUNT_MAX 0xFFFFFFu

static inline uint64_t prog_make(uint32_t xfer, int err, uint32_t count)
{
    return (uint64_t)xfer << 32 | (uint64_t)((uint32_t)-err & 0xFFu) << 24 |
           (count & PROG_COUNT_MAX);
}
static inline uint32_t prog_xfer(uint64_t p) { return (uint32_t)(p >> 32); }
static inline int prog_err(uint64_t p) { return -(int)((p >> 24) & 0xFFu); }
static inline uint32_t prog_count(uint64_t p) { return (uint32_t)p & PROG_COUNT_MAX; }

/* One side's lines; written by that side only. Lines that change per message sit
 * 128 bytes apart (adjacent-line prefetchers move 128-byte pairs of lines), with
 * 64-byte alignment only: a region needs no more. */
struct chan_side {
    /* identity: changes at open, close and set_copy only (the peer polls gen) */
    _Alignas(64) int32_t owner;    /* pid holding the side (0: none); CAS to open */
    uint32_t gen;                  /* odd while open; bumped by open and close */
    int32_t pid;                   /* owner's pid, published before gen turns odd */
    uint32_t flags;                /* SIDE_WANT_* */
    uint32_t cookie;               /* with end_addr: finds the end in a same-process peer */
    int32_t why;                   /* the error the owner closed the side for (a
                                      handler's: ofl_chan_close_why), 0 for none */
    uint64_t end_addr;
    /* side A: the registered memory of its current bulk transfer (CHUNK_MEM chunks),
     * written before the transfer's first chunk is posted */
    int32_t mem_fd;
    uint32_t pad3_;
    uint64_t mem_ino;
    uint64_t mem_len;
    uint8_t pad1_[128 - 56];
    /* the receiver's line. rx_waiting: set while a receiver is blocked in recv (or a
     * manager serves the end); read by a sender only when its timeout expires.
     * claim: sequence number of the last peer message this side took or the peer
     * withdrew (CAS by both); read by the peer only when the published ack lags. */
    uint32_t rx_waiting;
    uint32_t claim;
    uint8_t pad2_[128 - 8];
    struct chan_bulk_st st[2];
};
_Static_assert(offsetof(struct chan_side, rx_waiting) == 128, "side layout");
_Static_assert(offsetof(struct chan_side, st) == 256, "side layout");

enum { CHAN_FREE = 0, CHAN_READY = 1 };

/* A message line and the empty line after it. */
struct chan_line_slot {
    struct chan_line l;
    uint8_t pad_[64];
};

struct chan_ctl {
    _Alignas(64) uint32_t state;
    uint32_t id;
    char name[OFL_CHAN_NAME_MAX + 1];
    uint8_t pad_[128 - 40];
    struct chan_line_slot line[2];
    struct chan_side side[2];
    struct chan_sg sg[OFL_CHAN_SG_MAX];
};
_Static_assert(offsetof(struct chan_ctl, line) == 128 && sizeof(struct chan_ctl) % 64 == 0,
               "control block layout");

struct chan_region {
    uint64_t magic;
    uint32_t version;
    uint32_t nchan;
    uint64_t size;
    uint64_t stage_off;        /* offset of the staging slots */
    int32_t lock;              /* pid of the creator holding the table lock, 0 free */
    uint32_t ctl_size;
    uint32_t stage_size;       /* bytes of each channel's staging ring */
    uint8_t pad_[64 - 44];
};
_Static_assert(sizeof(struct chan_region) == 64, "region header is one line");

/* Payload of a KIND_CHUNK message (A -> B). */
struct chan_chunk_msg {
    uint32_t xfer;
    uint32_t index;
    uint64_t total;            /* bytes in the whole transfer */
    uint64_t offset;           /* where this chunk starts in the transfer */
    uint32_t bytes;            /* bytes in this chunk (<= OFL_CHAN_STAGE_SLOT) */
    uint16_t nent;             /* entries in the SG area */
    uint16_t flags;            /* CHUNK_STAGED: the bytes are in the staging ring at
                                  offset % ring size (wrapping around its end) */
};
_Static_assert(sizeof(struct chan_chunk_msg) <= OFL_CHAN_MSG_MAX, "chunk message fits");

/* Payload of a KIND_BEGIN message (B -> A). */
struct chan_begin_msg {
    uint32_t xfer;
    uint32_t pad_;
    uint64_t total;
};

/* CHUNK_STAGED: the bytes are in the staging ring. CHUNK_MEM: the SG entries are
 * offsets into side A's registered memory (described in its side line). */
enum { CHUNK_STAGED = 1u, CHUNK_MEM = 2u };

/* ---- region access ---- */
struct chan_region *chan_region_ok(const void *region);
struct chan_ctl *chan_ctl_at(const struct chan_region *r, uint32_t id);
uint8_t *chan_stage_at(const struct chan_region *r, uint32_t id);
/* Bytes of each staging ring in a region of `nchan` channels (a power of two of at
 * least 2 * OFL_CHAN_STAGE_SLOT). */
uint32_t chan_stage_size(uint32_t nchan);

static inline struct chan_ctl *end_ctl(const struct ofl_chan_end *e) { return e->ctl; }
static inline struct chan_side *side_mine(const struct ofl_chan_end *e)
{
    return &end_ctl(e)->side[e->side];
}
static inline struct chan_side *side_peer(const struct ofl_chan_end *e)
{
    return &end_ctl(e)->side[!e->side];
}
static inline struct chan_line *line_mine(const struct ofl_chan_end *e) { return e->line_mine; }
static inline struct chan_line *line_peer(const struct ofl_chan_end *e)
{
    return (struct chan_line *)e->line_peer;
}

/* ---- in-process call guards (e->busy[0] for TX, [1] for RX) ---- */
enum { BUSY_TX = 1u, BUSY_RX = 2u };
/* One byte per role, so the send and receive threads never share a written word.
 * A check and a store, not an exchange: the guard catches calls that overlap in
 * one role (misuse) except two starting at the same instant, and costs no locked
 * instruction on the message path. Our later post (a release CAS) orders the store
 * before it for ofl_chan_close. */
static inline int chan_busy_get(struct ofl_chan_end *e, uint32_t bits)
{
    for (int r = 0; r < 2; r++)
        if ((bits & (1u << r)) && __atomic_load_n(&e->busy[r], __ATOMIC_RELAXED)) return -EBUSY;
    for (int r = 0; r < 2; r++)
        if (bits & (1u << r)) __atomic_store_n(&e->busy[r], 1, __ATOMIC_RELAXED);
    return 0;
}
static inline void chan_busy_put(struct ofl_chan_end *e, uint32_t bits)
{
    for (int r = 0; r < 2; r++)
        if (bits & (1u << r)) __atomic_store_n(&e->busy[r], 0, __ATOMIC_RELEASE);
}

/* ---- the message lines ---- */
/* Copy a direct message's payload to or from a line. A full payload is copied with
 * a constant size, which the compiler inlines as a few vector moves: the library
 * call for a variable size costs a few ns on each side of every message (measured
 * with a two-process round trip of the channel calls). */
static inline void payload_copy(void *dst, const void *src, size_t len)
{
    if (len == OFL_CHAN_MSG_MAX)
        memcpy(dst, src, OFL_CHAN_MSG_MAX);
    else if (len)
        memcpy(dst, src, len);
}
static inline uint32_t *claim_mine(const struct ofl_chan_end *e) { return &side_mine(e)->claim; }
static inline uint32_t *claim_peer(const struct ofl_chan_end *e) { return &side_peer(e)->claim; }
/* 1 while our last posted message is neither taken nor withdrawn (the published ack,
 * then the peer's claim word). */
static inline bool chan_out_pending(const struct ofl_chan_end *e)
{
    uint32_t s = h_seq(__atomic_load_n(&line_mine(e)->hdr, __ATOMIC_RELAXED));
    if (h_ack(__atomic_load_n(&line_peer(e)->hdr, __ATOMIC_ACQUIRE)) == s) return false;
    return (__atomic_load_n(claim_peer(e), __ATOMIC_ACQUIRE) & SEQ_MASK) != s;
}
/* The published ack only: false means taken or withdrawn; true may be stale. */
static inline bool chan_out_pending_fast(const struct ofl_chan_end *e)
{
    return h_seq(__atomic_load_n(&line_mine(e)->hdr, __ATOMIC_RELAXED)) !=
           h_ack(__atomic_load_n(&line_peer(e)->hdr, __ATOMIC_ACQUIRE));
}
/* Publish our claim word in our header's ack field (no write when it is current). */
static inline void chan_ack_publish(struct ofl_chan_end *e)
{
    struct chan_line *l = line_mine(e);
    uint64_t h = __atomic_load_n(&l->hdr, __ATOMIC_ACQUIRE);
    for (;;) {
        uint32_t c = __atomic_load_n(claim_mine(e), __ATOMIC_ACQUIRE) & SEQ_MASK;
        if (h_ack(h) == c) return;
        uint64_t nh = h_make(h_seq(h), c, h_len(h), h_kind(h));
        if (__atomic_compare_exchange_n(&l->hdr, &h, nh, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&e->tx_hdr, nh, __ATOMIC_RELAXED);
            return;
        }
    }
}
/* chan_ack_publish when the claim may be ahead of what we published; reads our
 * header only then. Loads of a line the peer polls, right before we write it, cost
 * about a line transfer each on the message path (measured), hence the hint. */
static inline void chan_ack_publish_lazy(struct ofl_chan_end *e)
{
    uint32_t c = __atomic_load_n(claim_mine(e), __ATOMIC_ACQUIRE) & SEQ_MASK;
    if (h_ack(__atomic_load_n(&e->tx_hdr, __ATOMIC_RELAXED)) != c) chan_ack_publish(e);
}
/* Post `len` bytes of kind `kind` (our previous message must be resolved; the
 * caller holds the sending role). The CAS expects the header we last wrote (a
 * failure reloads it: the peer withdrew, or our receive thread published an ack). */
static inline void chan_line_post(struct ofl_chan_end *e, unsigned kind, const void *msg,
                                  size_t len)
{
    struct chan_line *l = line_mine(e);
    payload_copy(l->payload, msg, len);
    uint64_t h = __atomic_load_n(&e->tx_hdr, __ATOMIC_RELAXED);
    for (;;) {
        /* Read after the header: a withdrawal that moved our header moved the claim
         * first, so a failed CAS reloads both. */
        uint32_t c = __atomic_load_n(claim_mine(e), __ATOMIC_ACQUIRE);
        uint64_t nh = h_make(h_seq(h) + 1, c, (unsigned)len, kind);
        if (__atomic_compare_exchange_n(&l->hdr, &h, nh, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&e->tx_hdr, nh, __ATOMIC_RELAXED);
            __atomic_store_n(&e->tx_seq, h_seq(nh), __ATOMIC_RELAXED);
            return;
        }
    }
}
/* Withdraw our pending message: 1 withdrawn, 0 the peer had taken it. */
int chan_line_withdraw(struct ofl_chan_end *e);
/* A pending peer message: returns 1 and its header (and our claim at that time in
 * *ack), or 0. */
static inline int chan_line_peek(const struct ofl_chan_end *e, uint64_t *hdr,
                                 uint32_t *ack)
{
    /* Our claim first: the header read after it is at least as new, so a take's
     * CAS from this claim can only succeed for the message after it (a header read
     * first could be one the sender withdrew while we were preempted). */
    uint32_t a = __atomic_load_n(claim_mine(e), __ATOMIC_ACQUIRE);
    uint64_t ph = __atomic_load_n(&line_peer(e)->hdr, __ATOMIC_ACQUIRE);
    if (h_seq(ph) == (a & SEQ_MASK)) return 0;
    *hdr = ph;
    *ack = a;
    return 1;
}
/* Take the pending message whose header is `hdr` (our claim word; the ack is
 * published later: chan_ack_publish), after its payload was read. Returns 1, or 0
 * when the sender withdrew it meanwhile (the payload read means nothing). */
static inline int chan_line_claim(struct ofl_chan_end *e, uint64_t hdr, uint32_t ack)
{
    uint32_t c = ack;
    return __atomic_compare_exchange_n(claim_mine(e), &c, h_seq(hdr), false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_RELAXED);
}
/* Copy the pending message's payload (min(len, 56) bytes) to `buf`, then take it.
 * Returns 1, or 0 when the sender withdrew it meanwhile (buf then means nothing). */
static inline int chan_line_take(struct ofl_chan_end *e, uint64_t hdr, uint32_t ack, void *buf)
{
    unsigned len = h_len(hdr);
    if (len > OFL_CHAN_MSG_MAX) len = OFL_CHAN_MSG_MAX;
    if (len) memcpy(buf, line_peer(e)->payload, len);
    return chan_line_claim(e, hdr, ack);
}
/* chan_line_take, then publish the acknowledgement at once (bulk chunks). */
static inline int chan_line_take_ack(struct ofl_chan_end *e, uint64_t hdr, uint32_t ack,
                                     void *buf)
{
    if (!chan_line_take(e, hdr, ack, buf)) return 0;
    chan_ack_publish(e);
    return 1;
}

/* ---- peers and waiting ---- */
/* Is our end open (not closed by close() on another thread)? */
static inline bool chan_end_open(const struct ofl_chan_end *e)
{
    uint32_t g = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
    return (g & 1u) && __atomic_load_n(&side_mine(e)->gen, __ATOMIC_SEQ_CST) == g;
}

/* Per-call view of the peer plus the waiting state of a blocking call. */
struct chan_wait {
    struct ofl_waiter w;
    uint64_t deadline;          /* absolute ns (UINT64_MAX: none); 0 until the first
                                   clock read in chan_wait */
    uint64_t timeout;           /* the call's timeout (bulk: without progress) */
    uint64_t next_live;         /* next liveness check */
    uint32_t n;                 /* calls since the last clock read */
    uint32_t spin_max;          /* pauses before a wait yields (chan_wait_init: short) */
    uint32_t peer_gen;          /* the peer session we talk to; 0: none yet */
    pid_t peer_pid;
    int pidfd;                  /* -1 not opened, -2 pidfd unsupported */
};

/* Peer states from chan_peer_check. */
enum { PEER_OPEN = 0, PEER_ABSENT = 1 };

/* The peer as this call sees it: PEER_OPEN (attaching now if it just opened),
 * PEER_ABSENT (never opened yet), or -EPIPE (closed, or a different session). */
int chan_peer_check(const struct ofl_chan_end *e, struct chan_wait *cw);

void chan_wait_init(struct chan_wait *cw, const struct ofl_chan_end *e, uint64_t timeout_ns);
/* A wait that made no progress: spin or yield; checks the abort word, our end,
 * the peer's end, the peer's process (about every ms) and the deadline. Returns 0
 * (keep waiting), -ETIMEDOUT, -EPIPE or -ECANCELED. */
int chan_wait(struct chan_wait *cw, const struct ofl_chan_end *e);
/* Progress was made: spin again; bulk calls also push the deadline out. */
void chan_wait_progress(struct chan_wait *cw, bool push_deadline);
/* Wait up to `timeout_ns` more, counted from the next clock read. */
void chan_wait_extend(struct chan_wait *cw, uint64_t timeout_ns);
void chan_wait_done(struct chan_wait *cw);

/* Side A, after closing or failing a transfer: wait (bounded) until B no longer
 * copies to or from our memory in direction `dir` for transfer `xfer` (any
 * transfer when `any`), so the caller may free or reuse its buffer. */
void chan_quiesce_peer_copy(const struct ofl_chan_end *e, int dir, uint32_t xfer, bool any);

/* ---- counters ---- */
/* A counter has one writer at a time (the role guards see to it), so no atomic
 * add: a plain load and store that readers on other threads see whole. */
static inline void stat_add(uint64_t *c, uint64_t v)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

/* ---- bulk state machines (chan_bulk.c) ---- */
enum { BULK_IDLE = 0, BULK_SEND = 1, BULK_RECV = 2 };
/* Step results (>= 0) besides negative errors. */
enum { STEP_IDLE = 0, STEP_PROGRESS = 1, STEP_DONE = 2 };

struct chan_bulk {
    int role;                  /* BULK_SEND / BULK_RECV */
    int phase;
    uint8_t *buf;
    uint64_t len;
    uint32_t xfer;
    uint32_t crc;              /* running CRC: sent (A: through chunk `crced` - 1),
                                  landed (receiver), source (B) */
    int refuse;                /* manager: refuse the transfer (-EMSGSIZE) */
    const struct ofl_chan_mem *mem;   /* A: registered memory holding buf, or NULL */
    /* A: chunks posted, chunks acknowledged (sending) or verified (receiving),
     * bytes described so far, the chunks in flight (by slot) */
    uint32_t posted, acked;
    uint32_t crced;            /* A sending: chunks whose CRC it has published */
    uint64_t acked_bytes;      /* A: bytes of the chunks acknowledged or verified */
    uint64_t next_off;
    uint64_t fl_off[CHAN_INFLIGHT];
    uint32_t fl_bytes[CHAN_INFLIGHT];
    uint32_t fl_crc0[CHAN_INFLIGHT]; /* running CRC before the chunk (to re-post it staged) */
    uint32_t next_crc;         /* a staged next chunk: the running CRC through it */
    uint8_t fl_staged[CHAN_INFLIGHT];
    int line_ours;             /* our line holds a message of this transfer */
    /* A: the next chunk, prepared while the line is busy */
    int prepared;
    struct chan_chunk_msg next;
    uint32_t next_nent;
    /* B: next chunk index expected, bytes done */
    uint32_t index;
    uint64_t done;
    /* B receiving: chunks checked against A's CRCs; for each chunk landed and not yet
     * checked (by slot), the running CRC of what landed and its end offset */
    uint32_t verified;
    uint32_t got_crc[CHAN_INFLIGHT];
    uint64_t got_end[CHAN_INFLIGHT];
    /* liveness for callers without a chan_wait (the manager) */
    uint32_t peer_gen;
    pid_t peer_pid;
    /* SG entries: A's prepared chunk, or the chunk B took (last: not cleared) */
    struct chan_sg ents[OFL_CHAN_SG_MAX];
};

/* Begin a transfer on `e` (buffer `buf`, `len` bytes, inside registered memory
 * `mem` or not: NULL). Returns 0 or -EINVAL. */
int chan_bulk_start(struct ofl_chan_end *e, struct chan_bulk *op, int role, void *buf,
                    uint64_t len, const struct ofl_chan_mem *mem);
/* One non-blocking step: STEP_IDLE, STEP_PROGRESS, STEP_DONE or a negative error
 * (then the transfer is over on both sides: chan_bulk_fail has run). */
int chan_bulk_step(struct ofl_chan_end *e, struct chan_bulk *op);
/* End a transfer in progress with error `err` (timeout, abort, close): tells the
 * peer, withdraws our pending chunk message, waits until the peer no longer copies
 * our memory. */
void chan_bulk_fail(struct ofl_chan_end *e, struct chan_bulk *op, int err);
/* The call guards (BUSY_*) a transfer in `role` holds on `e`: side A posts chunks
 * either way, side B takes chunks either way. */
uint32_t chan_bulk_bits(const struct ofl_chan_end *e, int role);
/* A bulk transfer toward this end is announced: 1 and its size, else 0. */
int chan_bulk_incoming(const struct ofl_chan_end *e, uint64_t *total);

/* ---- registered memory, side B (chan_mem.c) ---- */
/* Map (or keep mapped) the registered memory side A described in its side line,
 * in process `pid`. Returns 0, or -EPERM when it cannot be mapped from here. */
int chan_mem_map(struct ofl_chan_end *e, pid_t pid);
/* Drop the mapping (idempotent; safe against a concurrent call of itself). */
void chan_mem_unmap(struct ofl_chan_end *e);

#endif
