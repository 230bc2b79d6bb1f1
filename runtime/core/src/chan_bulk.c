/* Channels: bulk transfers as non-blocking state machines (blocking calls loop
 * over the steps; managers interleave the steps of many channels).
 *
 * A -> B (direction 0)               B -> A (direction 1)
 *   A posts CHUNK 0..n-1, each with    B posts BEGIN(total).
 *     its SG entries in the SG area    A takes it, compares sizes (-EMSGSIZE) and
 *     and the total; after posting a     accepts by publishing the transfer id,
 *     chunk it computes the running      then posts CHUNK 0..n-1 describing its
 *     CRC32C through it and publishes    destination pages.
 *     it in its status line.           B takes each chunk, writes its bytes into
 *   B takes CHUNK 0, compares sizes      A's pages (or stages them), and acks it
 *     (-EMSGSIZE), copies each chunk     with the running CRC of what it sent.
 *     with the CRC of the bytes that   A verifies each acked chunk over the bytes
 *     landed, checks it against A's      that landed and publishes its count; B's
 *     once A's is out (-EBADMSG) and     send ends when A verified every chunk.
 *     acks it in its status line.
 * A keeps the line busy: while B copies chunk n, chunk n+1 is posted, and A's CRC of
 * chunk n runs beside B's copy of it, so neither waits for the other's pass over
 * the bytes (up to CHAN_INFLIGHT = 4 chunks in flight: the CRC slots). A side that
 * gives up publishes its error in its status line with the transfer id; the peer
 * sees it at its next step. Before side A returns from a
 * failed transfer it waits until B no longer copies A's memory (`copying`, with a
 * seq_cst store-then-load on both sides, so one of them always sees the other).
 *
 * Copy paths (side B): memcpy when A is an end in this process (found by address
 * and cookie, and every entry bounded by A's live buffer); between processes the
 * bounce through the staging ring unless an end asks for process_vm_readv/writev
 * (OFL_CHAN_COPY_VM: the emulated DMA reading A's pages by address; when the kernel
 * refuses it, EPERM or ENOSYS, the bounce again). In the bounce the bytes go
 * through the channel's staging ring (a chunk at transfer offset o
 * sits at o % ring size): A copies chunk n in before posting it (B asks by setting
 * SIDE_WANT_BOUNCE and leaving an unstaged chunk untaken: A withdraws and re-posts it
 * staged), or B stages chunk n and A copies it out when verifying. Up to 4 chunks
 * are in flight, and a chunk enters the ring only where the peer has consumed the
 * bytes of the previous round. Copies and CRCs are one pass (ofl_crc32c_copy). */
#include "chan_int.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define LOAD(p, o) __atomic_load_n((p), __ATOMIC_##o)
#define STORE(p, v, o) __atomic_store_n((p), (v), __ATOMIC_##o)

/* Largest transfer: chunk counts stay within 24 bits. */
#define BULK_MAX_LEN (1ull << 36)

enum { PH_WAIT = 0, PH_ACCEPT, PH_RUN, PH_FINAL, PH_OVER };

/* Direction of the transfer: 0 when A sends, 1 when B sends. */
static int op_dir(const struct ofl_chan_end *e, const struct chan_bulk *op)
{
    return (e->side == OFL_CHAN_A) == (op->role == BULK_SEND) ? 0 : 1;
}

/* The staging ring: a chunk at transfer offset `off` sits at off % ring size and
 * wraps around the ring's end. Copy it in (put) or out (get) with its running CRC. */
static uint32_t ring_put(const struct ofl_chan_end *e, uint64_t off, const uint8_t *src,
                         uint32_t bytes, uint32_t crc)
{
    uint32_t size = e->stage_size, at = (uint32_t)(off & (size - 1));
    uint32_t first = bytes < size - at ? bytes : size - at;
    crc = ofl_crc32c_copy(crc, e->stage + at, src, first);
    if (first < bytes) crc = ofl_crc32c_copy(crc, e->stage, src + first, bytes - first);
    return crc;
}

static uint32_t ring_get(const struct ofl_chan_end *e, uint64_t off, uint8_t *dst,
                         uint32_t bytes, uint32_t crc)
{
    uint32_t size = e->stage_size, at = (uint32_t)(off & (size - 1));
    uint32_t first = bytes < size - at ? bytes : size - at;
    crc = ofl_crc32c_copy(crc, dst, e->stage + at, first);
    if (first < bytes) crc = ofl_crc32c_copy(crc, dst + first, e->stage, bytes - first);
    return crc;
}

/* Chunk c's place in the per-chunk arrays and CRC slots. */
static inline uint32_t slot(uint32_t c)
{
    return c % CHAN_INFLIGHT;
}

/* May side A post another chunk? At most CHAN_INFLIGHT are in flight: B checks chunk
 * c against slot c's CRC, so chunk c waits until chunk c - CHAN_INFLIGHT is done. */
static bool inflight_room(const struct chan_bulk *op)
{
    return op->posted < op->acked + CHAN_INFLIGHT;
}

/* May the chunk after `next_off` go through the ring? A place in flight, and room
 * for the largest chunk past the bytes the peer has not consumed. */
static bool ring_room(const struct ofl_chan_end *e, const struct chan_bulk *op)
{
    return inflight_room(op) &&
           op->next_off + OFL_CHAN_STAGE_SLOT <= op->acked_bytes + e->stage_size;
}

static bool path_ok(unsigned p)
{
    return p == OFL_CHAN_PATH_MEMCPY || p == OFL_CHAN_PATH_VM || p == OFL_CHAN_PATH_BOUNCE ||
           p == OFL_CHAN_PATH_MEM;
}

static void count_path(struct ofl_chan_end *e, unsigned path, uint64_t bytes)
{
    if (!path_ok(path)) return;
    uint64_t *c = path == OFL_CHAN_PATH_MEMCPY ? &e->stats.bytes_memcpy
                  : path == OFL_CHAN_PATH_VM   ? &e->stats.bytes_vm
                  : path == OFL_CHAN_PATH_MEM  ? &e->stats.bytes_mem
                                               : &e->stats.bytes_bounce;
    stat_add(c, bytes);
    stat_add(&e->stats.chunks, 1);
    __atomic_fetch_or(&e->stats.paths, path, __ATOMIC_RELAXED);
}

static void set_progress(struct ofl_chan_end *e, uint64_t done, uint64_t len, uint32_t chunks,
                         int status)
{
    STORE(&e->progress.done, done, RELAXED);
    STORE(&e->progress.outstanding, len - done, RELAXED);
    STORE(&e->progress.chunks, chunks, RELAXED);
    STORE(&e->progress.status, status, RELAXED);
}

/* Our status line for this transfer: counters first, then the packed word. */
static void publish(struct ofl_chan_end *e, const struct chan_bulk *op, int err, uint32_t count,
                    uint64_t done)
{
    struct chan_bulk_st *st = &side_mine(e)->st[op_dir(e, op)];
    STORE(&st->done, done, RELAXED);
    STORE(&st->outstanding, op->len - done, RELAXED);
    /* An error is seq_cst: it pairs with the peer's store-then-load of `copying`
     * (copy_begin / chan_quiesce_peer_copy). Progress needs release only, which
     * does not stall this side until the peer's copy of the line is gone. */
    if (err)
        STORE(&st->prog, prog_make(op->xfer, err, count), SEQ_CST);
    else
        STORE(&st->prog, prog_make(op->xfer, err, count), RELEASE);
}

/* A transfer id above both sides' last one in this direction; its low bit is the
 * side that starts it. */
static uint32_t new_xfer(const struct ofl_chan_end *e, int dir)
{
    uint32_t a = prog_xfer(LOAD(&side_mine(e)->st[dir].prog, ACQUIRE));
    uint32_t b = prog_xfer(LOAD(&side_peer(e)->st[dir].prog, ACQUIRE));
    uint32_t m = a > b ? a : b;
    return (((m >> 1) + 1) << 1) | (uint32_t)e->side;
}

/* What a peer's error means here: the shared verdicts stay, a peer that gave up
 * (timeout, abort, closed) aborted the transfer. */
static int peer_err(int err)
{
    switch (err) {
    case -EMSGSIZE:
    case -EBADMSG:
    case -EFAULT:
    case -EPROTO:
    case -EPIPE: return err;   /* it found us (or itself) closed */
    default: return -ECONNABORTED;
    }
}

static int posted_count(const struct ofl_chan_end *e, const struct chan_bulk *op)
{
    if (e->side == OFL_CHAN_B) return (int)op->index;
    return (int)(op->role == BULK_SEND ? op->posted : op->acked);
}

static void op_end(struct ofl_chan_end *e, struct chan_bulk *op)
{
    if (e->side == OFL_CHAN_A) {
        STORE(&e->bulk_buf, NULL, RELEASE);
        STORE(&e->bulk_len, 0, RELEASE);
    }
    op->phase = PH_OVER;
}

void chan_bulk_fail(struct ofl_chan_end *e, struct chan_bulk *op, int err)
{
    if (op->phase == PH_OVER) return;
    int dir = op_dir(e, op);
    if (op->xfer) {
        uint32_t count = (uint32_t)posted_count(e, op);
        publish(e, op, err, count, e->side == OFL_CHAN_B ? op->done : 0);
    }
    /* A message of ours the peer has not taken is part of this transfer. */
    if (op->line_ours && chan_out_pending(e)) chan_line_withdraw(e);
    if (e->side == OFL_CHAN_A && op->xfer) chan_quiesce_peer_copy(e, dir, op->xfer, false);
    stat_add(&e->stats.bulk_failed, 1);
    STORE(&e->progress.status, err, RELAXED);
    op_end(e, op);
}

static int fail(struct ofl_chan_end *e, struct chan_bulk *op, int err)
{
    chan_bulk_fail(e, op, err);
    return err;
}

/* A call that found the wrong kind of message before any transfer began. */
static int unstarted(struct ofl_chan_end *e, struct chan_bulk *op, int err)
{
    STORE(&e->progress.status, err, RELAXED);
    op_end(e, op);
    return err;
}

static int finish(struct ofl_chan_end *e, struct chan_bulk *op)
{
    stat_add(op->role == BULK_SEND ? &e->stats.bulk_sent : &e->stats.bulk_received, 1);
    STORE(&e->progress.status, 0, RELAXED);
    op_end(e, op);
    return STEP_DONE;
}

int chan_bulk_start(struct ofl_chan_end *e, struct chan_bulk *op, int role, void *buf,
                    uint64_t len, const struct ofl_chan_mem *mem)
{
    if ((len && !buf) || len >= BULK_MAX_LEN || (role != BULK_SEND && role != BULK_RECV))
        return -EINVAL;
    memset(op, 0, offsetof(struct chan_bulk, ents));
    op->role = role;
    op->buf = buf;
    op->len = len;
    op->phase = PH_WAIT;
    int dir = op_dir(e, op);
    set_progress(e, 0, len, 0, 0);
    if (e->side == OFL_CHAN_A) {
        STORE(&e->bulk_len, len, RELEASE);
        STORE(&e->bulk_buf, (const uint8_t *)buf, RELEASE);
        if (mem && len) {
            /* Read by B when it takes a CHUNK_MEM chunk (whose post releases). */
            struct chan_side *s = side_mine(e);
            op->mem = mem;
            STORE(&s->mem_fd, mem->fd, RELAXED);
            STORE(&s->mem_ino, mem->ino, RELAXED);
            STORE(&s->mem_len, mem->len, RELAXED);
        }
    }
    if (role == BULK_SEND) {
        op->xfer = new_xfer(e, dir);
        if (e->side == OFL_CHAN_A) {
            publish(e, op, 0, 0, 0);
            op->phase = PH_RUN;
        }
    }
    return 0;
}

/* Our end still open, and the peer the session this transfer started with. */
static int peer_ok(const struct ofl_chan_end *e, struct chan_bulk *op)
{
    if (!chan_end_open(e)) return -EPIPE;
    uint32_t g = LOAD(&side_peer(e)->gen, ACQUIRE);
    if (op->peer_gen) return g == op->peer_gen ? 0 : -EPIPE;
    if (g & 1u) {
        op->peer_gen = g;
        op->peer_pid = LOAD(&side_peer(e)->pid, RELAXED);
        return 0;
    }
    return g == 0 ? 0 : -EPIPE;
}

/* ---- side A: describing its buffer ---- */

static bool more_chunks(const struct chan_bulk *op)
{
    return op->next_off < op->len || op->posted == 0;
}

/* Side A: how the next chunk describes its bytes: CHUNK_STAGED (sending through
 * the ring), CHUNK_MEM (offsets into our registered memory), 0 (addresses), or -1
 * not known yet (AUTO with the peer not open: its process decides). The rule
 * matches B's pick_path: a bounce either end asks for, process_vm_* either end asks
 * for, else (AUTO) B's memcpy within one process, and between processes registered
 * memory when the buffer is in it, else the bounce (B stages what it sends). */
static int chunk_kind(const struct ofl_chan_end *e, const struct chan_bulk *op)
{
    int mode = LOAD(&e->copy, RELAXED);
    uint32_t pf = LOAD(&side_peer(e)->flags, ACQUIRE);
    int bounce = op->role == BULK_SEND ? CHUNK_STAGED : 0;
    if (mode == OFL_CHAN_COPY_BOUNCE || (pf & SIDE_WANT_BOUNCE)) return bounce;
    if (mode == OFL_CHAN_COPY_VM || (pf & SIDE_WANT_VM)) return 0;
    if (!op->peer_pid) return -1;
    if (op->peer_pid == LOAD(&side_mine(e)->pid, RELAXED)) return 0;
    return op->mem ? CHUNK_MEM : bounce;
}

/* The next chunk (`kind` from chunk_kind): entries of our buffer from next_off,
 * each up to the next segment boundary (CHAN_SEG), at most K of them and `cap`
 * bytes, as addresses or (CHUNK_MEM) offsets into our registered memory. A staged
 * chunk is copied into the ring with its running CRC; any other chunk's CRC is
 * computed after it is posted (crc_posted). */
static void prepare(struct ofl_chan_end *e, struct chan_bulk *op, uint64_t cap, int kind)
{
    bool staged = kind == CHUNK_STAGED;
    uintptr_t rebase = kind == CHUNK_MEM ? (uintptr_t)op->mem->addr : 0;
    uint64_t off = op->next_off, left = op->len - off, bytes = 0;
    uint32_t k = LOAD(&e->sg_per_chunk, RELAXED), n = 0;
    if (k < 1 || k > OFL_CHAN_SG_MAX) k = OFL_CHAN_SG_DEFAULT;
    while (n < k && bytes < left && bytes < cap) {
        uintptr_t a = (uintptr_t)(op->buf + off + bytes);
        uint64_t l = CHAN_SEG - (a & (CHAN_SEG - 1));
        if (l > left - bytes) l = left - bytes;
        if (l > cap - bytes) l = cap - bytes;
        op->ents[n].addr = a - rebase;
        op->ents[n].len = l;
        n++;
        bytes += l;
    }
    memset(&op->next, 0, sizeof op->next);
    op->next.xfer = op->xfer;
    op->next.index = op->posted;
    op->next.total = op->len;
    op->next.offset = off;
    op->next.bytes = (uint32_t)bytes;
    op->next.nent = (uint16_t)n;
    op->next.flags = (uint16_t)kind;
    op->next_nent = n;
    if (op->role == BULK_SEND && staged)
        op->next_crc = ring_put(e, off, op->buf + off, (uint32_t)bytes, op->crc);
    op->prepared = 1;
}

/* Bytes in the next chunk of a two-stage transfer (a side stages or lands a chunk,
 * then the other copies it out or verifies it), at most `max`. A transfer of at most
 * `max` bytes would be one chunk whose two stages cannot overlap: it goes as chunks
 * of a quarter, a half and a quarter of `max` (fewer when shorter). Measured
 * (bench_chan lat, bounce, alternating builds): 32 and 64 KB transfers 15-20%
 * faster; ramping the chunks of longer transfers the same way gained nothing at
 * 128 KB and lost a few percent at 236 KB and 1 MB (more hand-offs). */
static uint64_t pipeline_cap(const struct chan_bulk *op, uint64_t max)
{
    if (op->len > max) return max;
    uint64_t tail = max / 4, cap = op->posted == 0 ? tail : max / 2;
    uint64_t left = op->len - op->next_off;
    if (left >= 2 * tail && left <= cap + tail) cap = left - tail;
    return cap;
}

/* A sending: publish the running CRC through chunk `crced` (B checks the bytes that
 * landed against it) and count it in our status line. */
static void crc_publish(struct ofl_chan_end *e, struct chan_bulk *op, uint32_t crc)
{
    struct chan_bulk_st *st = &side_mine(e)->st[0];
    uint32_t w = slot(op->crced);
    op->fl_crc0[w] = op->crc;
    op->crc = crc;
    STORE(&st->crc[w], crc, RELAXED);
    op->crced++;
    STORE(&st->prog, prog_make(op->xfer, 0, op->crced), RELEASE);
}

static void post_chunk(struct ofl_chan_end *e, struct chan_bulk *op)
{
    memcpy(end_ctl(e)->sg, op->ents, op->next_nent * sizeof *op->ents);
    uint32_t w = slot(op->posted);
    op->fl_off[w] = op->next.offset;
    op->fl_bytes[w] = op->next.bytes;
    op->fl_staged[w] = (uint8_t)(op->next.flags & CHUNK_STAGED);
    /* A staged chunk's CRC is known (computed while staging it): out before the
     * chunk, so B never checks it against the slot's previous value. That matters
     * for a chunk withdrawn and posted again staged: its CRC may be out already,
     * for the longer unstaged chunk it replaces. */
    if (op->role == BULK_SEND && op->fl_staged[w]) crc_publish(e, op, op->next_crc);
    chan_line_post(e, KIND_CHUNK, &op->next, sizeof op->next);
    op->line_ours = 1;
    op->posted++;
    op->next_off += op->next.bytes;
    op->prepared = 0;
}

/* A sending: the CRC of the oldest posted chunk whose CRC is not out yet. It runs
 * after the post, while B copies the chunk (B checks it when the CRC arrives), so
 * B never waits for our CRC before it can start copying. */
static bool crc_posted(struct ofl_chan_end *e, struct chan_bulk *op)
{
    if (op->crced == op->posted) return false;
    uint32_t w = slot(op->crced);
    crc_publish(e, op, ofl_crc32c(op->crc, op->buf + op->fl_off[w], op->fl_bytes[w]));
    return true;
}

static int step_a_send(struct ofl_chan_end *e, struct chan_bulk *op)
{
    const struct chan_side *b = side_peer(e);
    int progress = STEP_IDLE;
    uint64_t bp = LOAD(&b->st[0].prog, ACQUIRE);
    if (prog_xfer(bp) == op->xfer) {
        if (prog_err(bp)) return fail(e, op, peer_err(prog_err(bp)));
        uint32_t acked = prog_count(bp);
        if (acked > op->posted || acked < op->acked) return fail(e, op, -EPROTO);
        if (acked != op->acked) {
            for (; op->acked < acked; op->acked++)
                count_path(e, LOAD(&b->st[0].path[slot(op->acked)], RELAXED),
                           op->fl_bytes[slot(op->acked)]);
            uint32_t w = slot(acked - 1);
            op->acked_bytes = op->fl_off[w] + op->fl_bytes[w];
            set_progress(e, op->acked_bytes, op->len, acked, 0);
            progress = STEP_PROGRESS;
        }
        if (op->acked == op->posted && !more_chunks(op)) return finish(e, op);
    }
    /* B cannot read our memory and asks for the bounce: take back the unstaged
     * chunk it has not taken and post it again through a staging slot. */
    if (op->posted > op->acked && !op->fl_staged[slot(op->posted - 1)] &&
        (LOAD(&b->flags, ACQUIRE) & SIDE_WANT_BOUNCE) && chan_out_pending(e) &&
        chan_line_withdraw(e)) {
        uint32_t w = slot(op->posted - 1);
        op->posted--;
        op->next_off = op->fl_off[w];
        if (op->crced > op->posted) {   /* its CRC is out: taken back with it */
            op->crced = op->posted;
            op->crc = op->fl_crc0[w];
        }
        op->prepared = 0;
        op->line_ours = 0;
        progress = STEP_PROGRESS;
    }
    /* A staged chunk's CRC continues the previous one's. */
    int kind = op->prepared || !more_chunks(op) ? 0 : chunk_kind(e, op);
    if (!op->prepared && more_chunks(op) && kind >= 0 && inflight_room(op)) {
        bool staged = kind == CHUNK_STAGED;
        if (!staged || (ring_room(e, op) && op->crced == op->posted)) {
            prepare(e, op, staged ? pipeline_cap(op, OFL_CHAN_STAGE_SLOT) : UINT64_MAX, kind);
            progress = STEP_PROGRESS;
        }
    }
    if (op->prepared && !chan_out_pending(e)) {
        post_chunk(e, op);
        progress = STEP_PROGRESS;
    }
    /* One chunk's CRC per step, so a chunk ready to post waits for one CRC at most. */
    if (crc_posted(e, op)) progress = STEP_PROGRESS;
    return progress;
}

/* Tests only (ofl_chan_inject_corruption): is the corrupted byte in this chunk? */
static bool injected(const struct ofl_chan_end *e, uint64_t off, uint64_t bytes)
{
    uint64_t bad = LOAD(&e->corrupt_at, RELAXED);
    return bad >= off && bad - off < bytes;
}

/* Flip the injected byte of a chunk that landed at `dst` (offset `off`). */
static void corrupt(struct ofl_chan_end *e, uint8_t *dst, uint64_t off)
{
    dst[LOAD(&e->corrupt_at, RELAXED) - off] ^= 0xFFu;
    STORE(&e->corrupt_at, UINT64_MAX, RELAXED);
}

/* Side A receiving: check chunk `op->acked` that B acknowledged. */
static int verify_chunk(struct ofl_chan_end *e, struct chan_bulk *op, const struct chan_bulk_st *bst)
{
    uint32_t v = op->acked, w = slot(v);
    uint64_t off = op->fl_off[w];
    uint32_t bytes = op->fl_bytes[w];
    unsigned path = LOAD(&bst->path[w], RELAXED);
    uint32_t want = LOAD(&bst->crc[w], RELAXED);
    uint8_t *dst = op->buf + off;
    uint32_t crc;
    if (injected(e, off, bytes)) {
        if (path == OFL_CHAN_PATH_BOUNCE) ring_get(e, off, dst, bytes, 0);
        corrupt(e, dst, off);
        crc = ofl_crc32c(op->crc, dst, bytes);
    } else if (path == OFL_CHAN_PATH_BOUNCE) {
        /* One pass: the CRC of the bytes as they are written. */
        crc = ring_get(e, off, dst, bytes, op->crc);
    } else {
        crc = ofl_crc32c(op->crc, dst, bytes);
    }
    if (crc != want) return -EBADMSG;
    op->crc = crc;
    op->acked++;
    op->acked_bytes = off + bytes;
    count_path(e, path, bytes);
    publish(e, op, 0, op->acked, off + bytes);
    set_progress(e, off + bytes, op->len, op->acked, 0);
    return 0;
}

static int step_a_recv(struct ofl_chan_end *e, struct chan_bulk *op)
{
    const struct chan_side *b = side_peer(e);
    uint64_t ph;
    uint32_t ack;
    if (op->phase == PH_WAIT) {
        if (!chan_line_peek(e, &ph, &ack)) return STEP_IDLE;
        if (h_kind(ph) != KIND_BEGIN || h_len(ph) != sizeof(struct chan_begin_msg))
            return unstarted(e, op, -EPROTO);
        struct chan_begin_msg bm;
        memset(&bm, 0, sizeof bm);
        if (!chan_line_take_ack(e, ph, ack, &bm)) return STEP_IDLE;
        op->xfer = bm.xfer;
        if (op->refuse || bm.total != op->len) {
            STORE(&side_mine(e)->st[1].expected, op->refuse ? 0 : op->len, RELAXED);
            return fail(e, op, -EMSGSIZE);
        }
        publish(e, op, 0, 0, 0);
        op->phase = PH_RUN;
        return STEP_PROGRESS;
    }
    int progress = STEP_IDLE;
    uint64_t bp = LOAD(&b->st[1].prog, ACQUIRE);
    if (prog_xfer(bp) == op->xfer) {
        if (prog_err(bp)) return fail(e, op, peer_err(prog_err(bp)));
        uint32_t acks = prog_count(bp);
        if (acks > op->posted) return fail(e, op, -EPROTO);
        while (op->acked < acks) {
            int rc = verify_chunk(e, op, &b->st[1]);
            if (rc < 0) return fail(e, op, rc);
            progress = STEP_PROGRESS;
        }
        if (op->acked == op->posted && !more_chunks(op)) return finish(e, op);
    }
    /* B writes chunk c's CRC in slot c and may stage it in the ring: post chunk c
     * only once chunk c - CHAN_INFLIGHT is verified and the ring has room. */
    if (!op->prepared && more_chunks(op) && ring_room(e, op)) {
        int kind = chunk_kind(e, op);
        prepare(e, op, pipeline_cap(op, OFL_CHAN_STAGE_SLOT), kind < 0 ? 0 : kind);
        progress = STEP_PROGRESS;
    }
    if (op->prepared && !chan_out_pending(e)) {
        post_chunk(e, op);
        progress = STEP_PROGRESS;
    }
    return progress;
}

/* ---- side B: the copy engine ---- */

/* The peer's end when it lives in this process: found by the address and cookie it
 * published, read through process_vm_readv so a wrong address cannot fault. */
static const struct ofl_chan_end *same_process_peer(struct ofl_chan_end *e)
{
    if (e->peer_end) return e->peer_end;
    const struct chan_side *p = side_peer(e);
    uint64_t addr = LOAD(&p->end_addr, ACQUIRE);
    uint32_t cookie = LOAD(&p->cookie, ACQUIRE);
    struct ofl_chan_end tmp;
    struct iovec lv = {.iov_base = &tmp, .iov_len = sizeof tmp};
    struct iovec rv = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof tmp};
    if (process_vm_readv(getpid(), &lv, 1, &rv, 1, 0) != (ssize_t)sizeof tmp) return NULL;
    if (tmp.cookie != cookie || tmp.region != e->region || tmp.ctl != e->ctl ||
        tmp.id != e->id || tmp.side == e->side)
        return NULL;
    e->peer_end = (const struct ofl_chan_end *)(uintptr_t)addr;
    return e->peer_end;
}

/* Can process_vm_* reach the peer? Probed once per peer session on a byte of its
 * end (EFAULT still means permission was granted). */
static int vm_usable(struct ofl_chan_end *e, const struct chan_bulk *op)
{
    if (e->vm_state) return e->vm_state > 0;
    uint8_t byte;
    struct iovec lv = {.iov_base = &byte, .iov_len = 1};
    struct iovec rv = {
        .iov_base = (void *)(uintptr_t)LOAD(&side_peer(e)->end_addr, ACQUIRE), .iov_len = 1};
    if (process_vm_readv(op->peer_pid, &lv, 1, &rv, 1, 0) < 0 &&
        (errno == EPERM || errno == ENOSYS)) {
        e->vm_state = -1;
        return 0;
    }
    e->vm_state = 1;
    return 1;
}

/* How B moves a chunk with `flags`: OFL_CHAN_PATH_MEMCPY, _VM or _MEM, or 0 for
 * the bounce. */
static unsigned pick_path(struct ofl_chan_end *e, const struct chan_bulk *op, unsigned flags,
                          bool probe)
{
    if (e->vm_gen != op->peer_gen) {
        e->vm_gen = op->peer_gen;
        e->vm_state = 0;
        e->peer_end = NULL;
    }
    int mode = LOAD(&e->copy, RELAXED);
    uint32_t pf = LOAD(&side_peer(e)->flags, ACQUIRE);
    if (mode == OFL_CHAN_COPY_BOUNCE || (pf & SIDE_WANT_BOUNCE)) return 0;
    if (flags & CHUNK_MEM) {
        if (chan_mem_map(e, op->peer_pid) == 0) return OFL_CHAN_PATH_MEM;
        /* Not reachable from here: the bounce, for this peer's chunks to come too. */
        __atomic_fetch_or(&side_mine(e)->flags, SIDE_WANT_BOUNCE, __ATOMIC_RELEASE);
        return 0;
    }
    if (pf & SIDE_WANT_VM) mode = OFL_CHAN_COPY_VM;
    /* Our pid as recorded at open (getpid() is a system call per chunk). */
    bool same = op->peer_pid == LOAD(&side_mine(e)->pid, RELAXED);
    if (mode != OFL_CHAN_COPY_VM && same && same_process_peer(e)) return OFL_CHAN_PATH_MEMCPY;
    /* AUTO between processes: the bounce (two copies in parallel, one per side, run
     * several times faster than process_vm_*, which pins each page in the kernel:
     * offlow bench channels measures both). */
    if (mode == OFL_CHAN_COPY_AUTO && !same) return 0;
    if (e->vm_state < 0 || (probe && !vm_usable(e, op))) return 0;
    return OFL_CHAN_PATH_VM;
}

/* Announce that we copy A's memory for chunk `index`, then make sure A still runs
 * the transfer (A checks `copying` after publishing a failure, the reverse order). */
static int copy_begin(struct ofl_chan_end *e, const struct chan_bulk *op, int dir, uint32_t index)
{
    struct chan_bulk_st *st = &side_mine(e)->st[dir];
    STORE(&st->copying, (uint64_t)op->xfer << 32 | (index + 1u), SEQ_CST);
    const struct chan_side *a = side_peer(e);
    uint64_t ap = LOAD(&a->st[dir].prog, SEQ_CST);
    if (LOAD(&a->gen, SEQ_CST) != op->peer_gen) return -EPIPE;
    if (prog_xfer(ap) == op->xfer && prog_err(ap)) return peer_err(prog_err(ap));
    return 0;
}

static void copy_end(struct ofl_chan_end *e, int dir)
{
    STORE(&side_mine(e)->st[dir].copying, 0, RELEASE);
}

/* Every entry inside the same-process peer's live bulk buffer? */
static bool in_peer_buffer(const struct ofl_chan_end *peer, const struct chan_sg *ents,
                           uint32_t n)
{
    uintptr_t lo = (uintptr_t)LOAD(&peer->bulk_buf, ACQUIRE);
    uint64_t len = LOAD(&peer->bulk_len, ACQUIRE);
    if (!lo) return false;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t a = ents[i].addr;
        if (a < lo || a - lo > len || ents[i].len > len - (a - lo)) return false;
    }
    return true;
}

/* CHUNK_MEM: the entries' offsets as addresses in our mapping of A's registered
 * memory; -EFAULT when one lies outside it. */
static int mem_rebase(struct ofl_chan_end *e, struct chan_bulk *op, uint32_t n)
{
    uintptr_t base = (uintptr_t)e->mem_base;
    uint64_t len = e->mem_len;
    if (!base) return -EFAULT;
    for (uint32_t i = 0; i < n; i++) {
        if (op->ents[i].addr > len || op->ents[i].len > len - op->ents[i].addr) return -EFAULT;
        op->ents[i].addr += base;
    }
    return 0;
}

/* The entries B may copy directly: inside the same-process peer's buffer (MEMCPY)
 * or rebased into A's registered memory (MEM). 0 or -EFAULT. */
static int direct_entries(struct ofl_chan_end *e, struct chan_bulk *op, unsigned path,
                          uint32_t n)
{
    if (path == OFL_CHAN_PATH_MEM) return mem_rebase(e, op, n);
    return in_peer_buffer(e->peer_end, op->ents, n) ? 0 : -EFAULT;
}

/* Copy between `local` and the `n` entries (now addresses in this process) with the
 * running CRC of the bytes in transfer order: into local (`to_local`) or out of it.
 * Entries that continue one another are copied as one run: one call over a chunk
 * instead of one per page spares the CRC's per-call setup and reduction. */
static uint32_t copy_entries(uint32_t crc, uint8_t *local, const struct chan_sg *ents, uint32_t n,
                             bool to_local)
{
    uint64_t pos = 0;
    for (uint32_t i = 0; i < n;) {
        uint64_t addr = ents[i].addr, len = ents[i].len;
        for (i++; i < n && ents[i].addr == addr + len; i++) len += ents[i].len;
        uint8_t *far = (uint8_t *)(uintptr_t)addr;
        crc = to_local ? ofl_crc32c_copy(crc, local + pos, far, len)
                       : ofl_crc32c_copy(crc, far, local + pos, len);
        pos += len;
    }
    return crc;
}

/* process_vm_readv (write: writev) between `local` and A's entries. */
static int vm_copy(struct ofl_chan_end *e, const struct chan_bulk *op, uint8_t *local,
                   uint64_t bytes, uint32_t n, bool write)
{
    struct iovec lv = {.iov_base = local, .iov_len = bytes};
    struct iovec rv[OFL_CHAN_SG_MAX];
    for (uint32_t i = 0; i < n; i++) {
        rv[i].iov_base = (void *)(uintptr_t)op->ents[i].addr;
        rv[i].iov_len = op->ents[i].len;
    }
    ssize_t got = write ? process_vm_writev(op->peer_pid, &lv, 1, rv, n, 0)
                        : process_vm_readv(op->peer_pid, &lv, 1, rv, n, 0);
    if (got == (ssize_t)bytes) return 0;
    if (got >= 0) return -EFAULT;   /* part of the range is not mapped */
    if (errno == ESRCH) return -EPIPE;
    if (errno == EPERM || errno == ENOSYS) {
        e->vm_state = -1;
        return -EPERM;
    }
    return -EFAULT;
}

/* A chunk message B took: consistent with the transfer and its SG entries. */
static int check_chunk(const struct chan_bulk *op, const struct chan_chunk_msg *m, bool b_sends)
{
    if (m->nent > OFL_CHAN_SG_MAX || m->offset != op->done || m->bytes > op->len - op->done)
        return -EPROTO;
    if ((m->flags & ~(CHUNK_STAGED | CHUNK_MEM)) || m->flags == (CHUNK_STAGED | CHUNK_MEM) ||
        (b_sends && (m->flags & CHUNK_STAGED)))
        return -EPROTO;
    if (m->bytes == 0 && op->len != 0) return -EPROTO;
    if ((b_sends || (m->flags & CHUNK_STAGED)) && m->bytes > OFL_CHAN_STAGE_SLOT) return -EPROTO;
    /* A staged chunk is read from the ring: its SG entries were not fetched. */
    if (m->flags & CHUNK_STAGED) return 0;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < m->nent; i++) {
        if (op->ents[i].len == 0 || op->ents[i].len > m->bytes) return -EPROTO;
        sum += op->ents[i].len;
    }
    return sum == m->bytes ? 0 : -EPROTO;
}

/* Pending chunk message and its SG entries (none for a staged chunk), read before
 * taking it (valid once the take succeeds: A changes neither while the message is
 * pending). */
static int read_chunk(struct ofl_chan_end *e, struct chan_bulk *op, uint64_t ph,
                      struct chan_chunk_msg *m)
{
    if (h_kind(ph) != KIND_CHUNK || h_len(ph) != sizeof *m) return -EPROTO;
    memcpy(m, line_peer(e)->payload, sizeof *m);
    /* The bytes of a staged chunk are in the ring: its entries are not needed. */
    uint32_t n = m->nent <= OFL_CHAN_SG_MAX && !(m->flags & CHUNK_STAGED) ? m->nent : 0;
    memcpy(op->ents, end_ctl(e)->sg, n * sizeof *op->ents);
    return 0;
}

/* B receiving: land the chunk in our buffer; *crc gets the running CRC of the bytes
 * that landed (computed while copying where the copy is ours). */
static int copy_in(struct ofl_chan_end *e, struct chan_bulk *op, const struct chan_chunk_msg *m,
                   unsigned path, uint32_t *crc)
{
    uint8_t *dst = op->buf + m->offset;
    bool bad = injected(e, m->offset, m->bytes);
    if (path == OFL_CHAN_PATH_BOUNCE) {
        if (bad) {
            ring_get(e, m->offset, dst, m->bytes, 0);
            corrupt(e, dst, m->offset);
            *crc = ofl_crc32c(op->crc, dst, m->bytes);
        } else {
            *crc = ring_get(e, m->offset, dst, m->bytes, op->crc);
        }
        return 0;
    }
    int rc = copy_begin(e, op, 0, m->index);
    uint32_t c = op->crc;
    if (!rc && (path == OFL_CHAN_PATH_MEMCPY || path == OFL_CHAN_PATH_MEM)) {
        rc = direct_entries(e, op, path, m->nent);
        if (!rc) c = copy_entries(c, dst, op->ents, m->nent, true);
    } else if (!rc) {
        rc = vm_copy(e, op, dst, m->bytes, m->nent, false);
        if (rc == -EPERM) rc = -EFAULT;   /* permission vanished after the probe */
        if (!rc && !bad) c = ofl_crc32c(c, dst, m->bytes);
    }
    copy_end(e, 0);
    if (!rc && bad) {
        corrupt(e, dst, m->offset);
        c = ofl_crc32c(op->crc, dst, m->bytes);
    }
    *crc = c;
    return rc;
}

/* B receiving: check the chunks that landed against the CRCs A has published
 * (A computes each after posting the chunk) and acknowledge them. Returns 1 when
 * some were checked, 0 when none could be, or -EBADMSG. */
static int check_landed(struct ofl_chan_end *e, struct chan_bulk *op, uint64_t ap)
{
    const struct chan_side *a = side_peer(e);
    /* another transfer's count, or A gave up (its count is then not CRCs: the
     * caller's next look at A's status sees the error) */
    if (prog_xfer(ap) != op->xfer || prog_err(ap)) return 0;
    uint32_t have = prog_count(ap);
    uint32_t v0 = op->verified;
    for (; op->verified < op->index && op->verified < have; op->verified++) {
        uint32_t w = slot(op->verified);
        if (op->got_crc[w] != LOAD(&a->st[0].crc[w], RELAXED)) return -EBADMSG;
    }
    if (op->verified == v0) return 0;
    uint64_t end = op->got_end[slot(op->verified - 1)];
    publish(e, op, 0, op->verified, end);
    set_progress(e, end, op->len, op->verified, 0);
    return 1;
}

static int step_b_recv(struct ofl_chan_end *e, struct chan_bulk *op)
{
    const struct chan_side *a = side_peer(e);
    int progress = STEP_IDLE;
    if (op->phase == PH_RUN) {
        uint64_t ap = LOAD(&a->st[0].prog, ACQUIRE);
        if (prog_xfer(ap) == op->xfer) {
            if (prog_err(ap)) return fail(e, op, peer_err(prog_err(ap)));
            int rc = check_landed(e, op, ap);
            if (rc < 0) return fail(e, op, rc);
            if (rc) progress = STEP_PROGRESS;
        }
        if (op->verified == op->index && op->done == op->len) return finish(e, op);
    }
    uint64_t ph;
    uint32_t ack;
    if (!chan_line_peek(e, &ph, &ack)) return progress;
    struct chan_chunk_msg m;
    if (read_chunk(e, op, ph, &m) < 0)
        return op->phase == PH_WAIT ? unstarted(e, op, -EPROTO) : fail(e, op, -EPROTO);
    /* A stages when asked; until it sees the request, leave its chunk untaken. */
    if (!(m.flags & CHUNK_STAGED) && !pick_path(e, op, m.flags, true)) {
        struct chan_side *s = side_mine(e);
        __atomic_fetch_or(&s->flags, SIDE_WANT_BOUNCE, __ATOMIC_RELEASE);
        return progress;
    }
    if (!chan_line_take_ack(e, ph, ack, &m)) return progress;
    if (op->phase == PH_WAIT) {
        if (m.index != 0) return STEP_PROGRESS;   /* left from a transfer given up */
        op->xfer = m.xfer;
        if (op->refuse || m.total != op->len) {
            STORE(&side_mine(e)->st[0].expected, op->refuse ? 0 : op->len, RELAXED);
            return fail(e, op, -EMSGSIZE);
        }
        op->phase = PH_RUN;
        publish(e, op, 0, 0, 0);
    } else if (m.xfer != op->xfer || m.index != op->index ||
               m.index >= op->verified + CHAN_INFLIGHT) {
        /* out of order, or a fifth chunk before the first of four was acknowledged */
        return fail(e, op, -EPROTO);
    }
    int rc = check_chunk(op, &m, false);
    if (rc < 0) return fail(e, op, rc);
    unsigned path =
        (m.flags & CHUNK_STAGED) ? OFL_CHAN_PATH_BOUNCE : pick_path(e, op, m.flags, false);
    if (!path) return fail(e, op, -EPROTO);
    uint32_t crc = 0;
    rc = copy_in(e, op, &m, path, &crc);
    if (rc < 0) return fail(e, op, rc);
    /* Checked when A's CRC of the chunk is out (check_landed): A computes it while
     * we copy. Delivered only once every chunk checked. */
    op->crc = crc;
    op->got_crc[slot(m.index)] = crc;
    op->got_end[slot(m.index)] = m.offset + m.bytes;
    op->done += m.bytes;
    op->index++;
    STORE(&side_mine(e)->st[0].path[slot(m.index)], (uint8_t)path, RELAXED);
    count_path(e, path, m.bytes);
    rc = check_landed(e, op, LOAD(&a->st[0].prog, ACQUIRE));
    if (rc < 0) return fail(e, op, rc);
    if (op->verified == op->index && op->done == op->len) return finish(e, op);
    return STEP_PROGRESS;
}

/* B sending: put the chunk's bytes into A's pages (or stage them); *crc gets the
 * running CRC of what was sent. */
static int copy_out(struct ofl_chan_end *e, struct chan_bulk *op, const struct chan_chunk_msg *m,
                    unsigned *path, uint32_t *crc)
{
    const uint8_t *src = op->buf + m->offset;
    unsigned p = pick_path(e, op, m->flags, false);
    if (p) {
        int rc = copy_begin(e, op, 1, m->index);
        if (!rc && (p == OFL_CHAN_PATH_MEMCPY || p == OFL_CHAN_PATH_MEM)) {
            rc = direct_entries(e, op, p, m->nent);
            if (!rc) *crc = copy_entries(op->crc, (uint8_t *)src, op->ents, m->nent, false);
        } else if (!rc) {
            *crc = ofl_crc32c(op->crc, src, m->bytes);
            rc = vm_copy(e, op, (uint8_t *)src, m->bytes, m->nent, true);
        }
        copy_end(e, 1);
        if (rc == -EPERM)
            p = 0;
        else if (rc < 0)
            return rc;
    }
    if (!p) {
        *crc = ring_put(e, m->offset, src, m->bytes, op->crc);
        p = OFL_CHAN_PATH_BOUNCE;
    }
    *path = p;
    return 0;
}

static int step_b_send(struct ofl_chan_end *e, struct chan_bulk *op)
{
    const struct chan_side *a = side_peer(e);
    if (op->phase == PH_WAIT) {
        if (chan_out_pending(e)) return STEP_IDLE;   /* an earlier post is in the way */
        struct chan_begin_msg bm;
        memset(&bm, 0, sizeof bm);
        bm.xfer = op->xfer;
        bm.total = op->len;
        publish(e, op, 0, 0, 0);
        chan_line_post(e, KIND_BEGIN, &bm, sizeof bm);
        op->line_ours = 1;
        op->phase = PH_ACCEPT;
        return STEP_PROGRESS;
    }
    uint64_t ap = LOAD(&a->st[1].prog, ACQUIRE);
    bool accepted = prog_xfer(ap) == op->xfer;
    if (accepted && prog_err(ap)) return fail(e, op, peer_err(prog_err(ap)));
    if (op->phase == PH_FINAL)
        return accepted && prog_count(ap) == op->index ? finish(e, op) : STEP_IDLE;
    uint64_t ph;
    uint32_t ack;
    if (!chan_line_peek(e, &ph, &ack)) return STEP_IDLE;
    struct chan_chunk_msg m;
    /* A direct message waits for a receive; only chunks concern us. */
    if (read_chunk(e, op, ph, &m) < 0) return STEP_IDLE;
    if (m.xfer != op->xfer) {
        /* A's first chunk of its own transfer while our BEGIN waits: both ends
         * send at once, and side A has the right of way. */
        if (op->phase == PH_ACCEPT && m.index == 0 && !(m.xfer & 1u) && chan_line_withdraw(e)) {
            op->line_ours = 0;
            return fail(e, op, -EPROTO);
        }
        return STEP_IDLE;
    }
    if (!chan_line_take_ack(e, ph, ack, &m)) return STEP_IDLE;
    op->line_ours = 0;
    op->phase = PH_RUN;
    if (m.index != op->index) return fail(e, op, -EPROTO);
    int rc = check_chunk(op, &m, true);
    if (rc < 0) return fail(e, op, rc);
    unsigned path = 0;
    uint32_t crc = 0;
    rc = copy_out(e, op, &m, &path, &crc);
    if (rc < 0) return fail(e, op, rc);
    struct chan_bulk_st *st = &side_mine(e)->st[1];
    STORE(&st->crc[slot(m.index)], crc, RELAXED);
    STORE(&st->path[slot(m.index)], (uint8_t)path, RELAXED);
    op->crc = crc;
    op->done += m.bytes;
    op->index++;
    publish(e, op, 0, op->index, op->done);
    count_path(e, path, m.bytes);
    set_progress(e, op->done, op->len, op->index, 0);
    if (op->done == op->len) op->phase = PH_FINAL;
    return STEP_PROGRESS;
}

/* The peer is gone: did it leave a verdict on this transfer first? STEP_DONE, a
 * negative error, or 0 for none. */
static int peer_verdict(const struct ofl_chan_end *e, const struct chan_bulk *op)
{
    if (!op->xfer) return 0;
    uint64_t p = LOAD(&side_peer(e)->st[op_dir(e, op)].prog, ACQUIRE);
    if (prog_xfer(p) != op->xfer) return 0;
    if (prog_err(p)) return peer_err(prog_err(p));
    if (e->side == OFL_CHAN_A && op->role == BULK_SEND && !op->prepared && !more_chunks(op) &&
        prog_count(p) == op->posted)
        return STEP_DONE;
    if (e->side == OFL_CHAN_B && op->role == BULK_SEND && op->phase == PH_FINAL &&
        prog_count(p) == op->index)
        return STEP_DONE;
    return 0;
}

int chan_bulk_step(struct ofl_chan_end *e, struct chan_bulk *op)
{
    if (op->phase == PH_OVER) return -EINVAL;
    int rc = peer_ok(e, op);
    if (rc < 0) {
        /* Side A receiving can still check chunks B acknowledged before it went. */
        if (e->side == OFL_CHAN_A && op->role == BULK_RECV && op->phase == PH_RUN &&
            chan_end_open(e) && !peer_verdict(e, op)) {
            uint64_t p = LOAD(&side_peer(e)->st[1].prog, ACQUIRE);
            if (prog_xfer(p) == op->xfer && prog_count(p) == op->posted && !more_chunks(op) &&
                !op->prepared) {
                int r = step_a_recv(e, op);
                if (r == STEP_DONE || r < 0) return r;
            }
        }
        int v = chan_end_open(e) ? peer_verdict(e, op) : 0;
        if (v == STEP_DONE) return finish(e, op);
        if (v < 0) rc = v;
        return op->xfer ? fail(e, op, rc) : unstarted(e, op, rc);
    }
    if (e->side == OFL_CHAN_A) return op->role == BULK_SEND ? step_a_send(e, op) : step_a_recv(e, op);
    return op->role == BULK_SEND ? step_b_send(e, op) : step_b_recv(e, op);
}

int chan_bulk_incoming(const struct ofl_chan_end *e, uint64_t *total)
{
    uint64_t ph;
    uint32_t ack;
    if (!chan_line_peek(e, &ph, &ack)) return 0;
    const uint8_t *p = line_peer(e)->payload;
    if (e->side == OFL_CHAN_B && h_kind(ph) == KIND_CHUNK &&
        h_len(ph) == sizeof(struct chan_chunk_msg)) {
        struct chan_chunk_msg m;
        memcpy(&m, p, sizeof m);
        *total = m.total;
        return 1;
    }
    if (e->side == OFL_CHAN_A && h_kind(ph) == KIND_BEGIN &&
        h_len(ph) == sizeof(struct chan_begin_msg)) {
        struct chan_begin_msg m;
        memcpy(&m, p, sizeof m);
        *total = m.total;
        return 1;
    }
    return 0;
}

/* ---- blocking calls ---- */

uint32_t chan_bulk_bits(const struct ofl_chan_end *e, int role)
{
    if (e->side == OFL_CHAN_A) return role == BULK_SEND ? BUSY_TX : BUSY_TX | BUSY_RX;
    return role == BULK_SEND ? BUSY_TX | BUSY_RX : BUSY_RX;
}

static int bulk_call(struct ofl_chan_end *e, int role, void *buf, size_t len, uint64_t timeout,
                     const struct ofl_chan_mem *mem)
{
    if (!e || !e->ctl || (len && !buf)) return -EINVAL;
    uint32_t bits = chan_bulk_bits(e, role);
    if (chan_busy_get(e, bits)) return -EBUSY;
    struct chan_bulk op;
    int rc = chan_end_open(e) ? chan_bulk_start(e, &op, role, buf, len, mem) : -EPIPE;
    if (!rc) {
        struct chan_wait cw;
        chan_wait_init(&cw, e, timeout);
        /* A bulk wait is for a chunk the peer is copying or describing (tens of us
         * with large K): spin it out before yielding. Yielding in the middle of one
         * measured 10-20x slower transfers in phases on the 2-vCPU machine (bench_chan
         * tput, 1 MB in chunks of 128-256 KB: 3-5 Gb/s against 80-100), and spinning
         * longer did not slow 8 transfers at once on 2 CPUs (x8 rows). */
        cw.spin_max = OFL_WAIT_SPINS;
        for (;;) {
            rc = chan_bulk_step(e, &op);
            if (rc == STEP_DONE) {
                rc = 0;
                break;
            }
            if (rc < 0) break;
            if (rc == STEP_PROGRESS) {
                chan_wait_progress(&cw, true);
                continue;
            }
            rc = chan_wait(&cw, e);
            if (rc == -EPIPE) {
                /* The peer closed or died: a verdict it published first still counts. */
                rc = chan_bulk_step(e, &op);
                if (rc == STEP_DONE) {
                    rc = 0;
                    break;
                }
                if (rc < 0) break;
                rc = -EPIPE;
            }
            if (rc) {
                if (op.xfer)
                    chan_bulk_fail(e, &op, rc);
                else
                    unstarted(e, &op, rc);
                break;
            }
        }
        chan_wait_done(&cw);
    }
    chan_busy_put(e, bits);
    /* Closed under us: ofl_chan_close leaves the mapping of the peer's registered
     * memory to a call it found busy. Our store of busy, then our load of gen; close
     * stores gen, then loads busy: one of the two drops it (chan_mem_unmap is an
     * exchange). */
    if (e->side == OFL_CHAN_B) {
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (!chan_end_open(e)) chan_mem_unmap(e);
    }
    return rc;
}

int ofl_chan_bulk_send(struct ofl_chan_end *e, const void *buf, size_t len, uint64_t timeout_ns)
{
    return bulk_call(e, BULK_SEND, (void *)(uintptr_t)buf, len, timeout_ns, NULL);
}

int ofl_chan_bulk_recv(struct ofl_chan_end *e, void *buf, size_t len, uint64_t timeout_ns)
{
    return bulk_call(e, BULK_RECV, buf, len, timeout_ns, NULL);
}

/* The `len` bytes at `off` in registered memory `m`, or NULL when out of it. */
static uint8_t *mem_range(const struct ofl_chan_mem *m, size_t off, size_t len)
{
    if (!m || !m->addr || off > m->len || len > m->len - off) return NULL;
    return m->addr + off;
}

int ofl_chan_bulk_send_mem(struct ofl_chan_end *e, const struct ofl_chan_mem *m, size_t off,
                           size_t len, uint64_t timeout_ns)
{
    uint8_t *p = mem_range(m, off, len);
    return p ? bulk_call(e, BULK_SEND, p, len, timeout_ns, m) : -EINVAL;
}

int ofl_chan_bulk_recv_mem(struct ofl_chan_end *e, const struct ofl_chan_mem *m, size_t off,
                           size_t len, uint64_t timeout_ns)
{
    uint8_t *p = mem_range(m, off, len);
    return p ? bulk_call(e, BULK_RECV, p, len, timeout_ns, m) : -EINVAL;
}
