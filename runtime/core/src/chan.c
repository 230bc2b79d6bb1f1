/* Channels: the region, names, ends, peers, waiting and direct messages.
 *
 * Direct message protocol. Each side has a message line (header seq:24 | ack:24 |
 * len | kind, and the payload) and a claim word in its receiver line:
 *   send     write the payload, then CAS our header to seq + 1 (release); the
 *            message is pending while our seq != the peer's claim. Wait until the
 *            peer's published ack (its header) equals our seq; after a while also
 *            look at its claim word (the ack may not be published yet).
 *   receive  see the peer's seq != our claim (acquire), copy the payload, then CAS
 *            our claim from the value we saw to the peer's seq. The ack is
 *            published in our header lazily: with our next message (so a reply
 *            carries the acknowledgement of its request: one line transfer each
 *            way instead of two), at the start of our next receive, on close, and
 *            at once for bulk chunks. Until then a sender learns of the take from
 *            our claim word, which it reads only after its fast checks failed
 *            (SLOW_CHECK_AFTER waits), so a receiver that takes a message and then
 *            does not call again delays the sender's return by about a microsecond.
 *   withdraw a sender that gives up (timeout, abort, close) CASes the receiver's
 *            claim from seq - 1 to seq itself, then moves the receiver's published
 *            ack to seq. Taking and withdrawing are CASes on the same word
 *            expecting the same old value, so exactly one succeeds: if the
 *            withdrawal wins, the receiver's CAS fails and it drops the copy it made
 *            (the sender may already be writing its next payload); if the take
 *            wins, the withdrawal sees claim == seq and the send reports success. A
 *            receiver preempted between its copy and its CAS could be fooled only
 *            if the sender withdrew 2^24 messages meanwhile; each withdrawal of a
 *            message to a waiting receiver first waits OFL_CHAN_GRACE_NS, so that
 *            takes hours.
 * The published ack lags the claim word by at most one message (a take publishes
 * the previous one, a withdrawal publishes itself), so "ack == seq" never holds
 * by wrap-around. Header and claim words are written with CAS by everyone (the
 * owner's send and receive threads, the peer's withdrawals); everything else in a
 * side's lines has one writer.
 * The message path keeps hints in the end (our header as we last wrote it, our last
 * message known taken) instead of reading lines the peer polls before it writes:
 * each such load cost about a line transfer on the round trip (measured with
 * offlow bench channels). A stale hint makes a CAS fail and reload, or sends the
 * call to the general path; it never changes an answer. */
#include "chan_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "offlow/hash.h"

#define LOAD(p, o) __atomic_load_n((p), __ATOMIC_##o)
#define STORE(p, v, o) __atomic_store_n((p), (v), __ATOMIC_##o)

/* ---- region ---- */

static size_t ctl_bytes(uint32_t nchan)
{
    return sizeof(struct chan_region) + (size_t)nchan * sizeof(struct chan_ctl);
}

static size_t stage_offset(uint32_t nchan)
{
    return (ctl_bytes(nchan) + CHAN_PAGE - 1) / CHAN_PAGE * CHAN_PAGE;
}

uint32_t chan_stage_size(uint32_t nchan)
{
    if (nchan <= 16) return OFL_CHAN_STAGE_MAX;
    return nchan <= 256 ? 4 * OFL_CHAN_STAGE_SLOT : 2 * OFL_CHAN_STAGE_SLOT;
}

size_t ofl_chan_region_size(uint32_t nchan)
{
    if (nchan == 0 || nchan > CHAN_MAX_CHANNELS) return 0;
    return stage_offset(nchan) + (size_t)nchan * chan_stage_size(nchan);
}

int ofl_chan_region_format(void *mem, size_t size, uint32_t nchan)
{
    size_t need = ofl_chan_region_size(nchan);
    if (!mem || (uintptr_t)mem % 64 || need == 0 || size < need) return -EINVAL;
    memset(mem, 0, ctl_bytes(nchan));
    struct chan_region *r = mem;
    r->version = CHAN_VERSION;
    r->nchan = nchan;
    r->size = size;
    r->stage_off = stage_offset(nchan);
    r->ctl_size = (uint32_t)sizeof(struct chan_ctl);
    r->stage_size = chan_stage_size(nchan);
    for (uint32_t i = 0; i < nchan; i++) chan_ctl_at(r, i)->id = i;
    /* The magic last: a region with a magic is complete. */
    STORE(&r->magic, CHAN_MAGIC, RELEASE);
    return 0;
}

struct chan_region *chan_region_ok(const void *region)
{
    struct chan_region *r = (struct chan_region *)region;
    if (!r || (uintptr_t)r % 64 || LOAD(&r->magic, ACQUIRE) != CHAN_MAGIC) return NULL;
    if (r->version != CHAN_VERSION || r->ctl_size != sizeof(struct chan_ctl)) return NULL;
    size_t need = ofl_chan_region_size(r->nchan);
    if (need == 0 || r->size < need || r->stage_off != stage_offset(r->nchan) ||
        r->stage_size != chan_stage_size(r->nchan))
        return NULL;
    return r;
}

struct chan_ctl *chan_ctl_at(const struct chan_region *r, uint32_t id)
{
    return (struct chan_ctl *)((uint8_t *)r + sizeof *r + (size_t)id * sizeof(struct chan_ctl));
}

uint8_t *chan_stage_at(const struct chan_region *r, uint32_t id)
{
    return (uint8_t *)r + r->stage_off + (size_t)id * r->stage_size;
}

/* ---- names ---- */

static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Length of a valid name, or 0. */
static size_t name_len(const char *name)
{
    if (!name) return 0;
    size_t n = strnlen(name, OFL_CHAN_NAME_MAX + 1);
    return n <= OFL_CHAN_NAME_MAX ? n : 0;
}

static bool name_is(const struct chan_ctl *c, const char *name, size_t n)
{
    return memcmp(c->name, name, n) == 0 && c->name[n] == '\0';
}

/* The table lock: the holder's pid; a dead holder's lock is taken over. */
static void table_lock(struct chan_region *r)
{
    int32_t me = (int32_t)getpid();
    for (;;) {
        int32_t cur = 0;
        if (__atomic_compare_exchange_n(&r->lock, &cur, me, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        if (cur != me && !ofl_pid_alive(cur, NULL) &&
            __atomic_compare_exchange_n(&r->lock, &cur, me, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

static void table_unlock(struct chan_region *r)
{
    STORE(&r->lock, 0, RELEASE);
}

int ofl_chan_create(void *region, const char *name)
{
    struct chan_region *r = chan_region_ok(region);
    size_t n = name_len(name);
    if (!r || n == 0) return -EINVAL;
    table_lock(r);
    int rc = -ENOSPC;
    uint32_t h = name_hash(name, n);
    for (uint32_t i = 0; i < r->nchan; i++) {
        uint32_t id = (h + i) % r->nchan;
        struct chan_ctl *c = chan_ctl_at(r, id);
        if (LOAD(&c->state, ACQUIRE) == CHAN_READY) {
            if (name_is(c, name, n)) {
                rc = -EEXIST;
                break;
            }
            continue;
        }
        memset(c->name, 0, sizeof c->name);
        memcpy(c->name, name, n);
        c->id = id;
        STORE(&c->state, CHAN_READY, RELEASE);
        rc = (int)id;
        break;
    }
    table_unlock(r);
    return rc;
}

int ofl_chan_lookup(const void *region, const char *name)
{
    const struct chan_region *r = chan_region_ok(region);
    size_t n = name_len(name);
    if (!r || n == 0) return -EINVAL;
    uint32_t h = name_hash(name, n);
    /* Names are never removed, so a probe ends at the first free slot. */
    for (uint32_t i = 0; i < r->nchan; i++) {
        uint32_t id = (h + i) % r->nchan;
        const struct chan_ctl *c = chan_ctl_at(r, id);
        if (LOAD(&c->state, ACQUIRE) != CHAN_READY) return -ENOENT;
        if (name_is(c, name, n)) return (int)id;
    }
    return -ENOENT;
}

const char *ofl_chan_name(const void *region, uint32_t id)
{
    const struct chan_region *r = chan_region_ok(region);
    if (!r || id >= r->nchan) return NULL;
    const struct chan_ctl *c = chan_ctl_at(r, id);
    if (LOAD(&c->state, ACQUIRE) != CHAN_READY || c->name[OFL_CHAN_NAME_MAX] != '\0')
        return NULL;
    return c->name;
}

/* ---- liveness ---- */

/* ---- ends ---- */

/* A usable end: opened once (open or closed now). */
static bool end_valid(const struct ofl_chan_end *e)
{
    return e && e->ctl && e->line_mine && e->line_peer;
}

int ofl_chan_open(struct ofl_chan_end *e, void *region, uint32_t id, int side,
                  const volatile uint32_t *abort_flag)
{
    if (!e) return -EINVAL;
    memset(e, 0, sizeof *e);
    e->corrupt_at = UINT64_MAX;
    e->sg_per_chunk = OFL_CHAN_SG_DEFAULT;
    e->intr_fd = -1;
    struct chan_region *r = chan_region_ok(region);
    if (!r || id >= r->nchan || (side != OFL_CHAN_A && side != OFL_CHAN_B)) return -EINVAL;
    struct chan_ctl *c = chan_ctl_at(r, id);
    if (LOAD(&c->state, ACQUIRE) != CHAN_READY) return -EINVAL;
    struct chan_side *s = &c->side[side];
    int32_t me = (int32_t)getpid();
    int32_t cur = LOAD(&s->owner, ACQUIRE);
    for (;;) {
        /* Free, or held by a process that died without closing: take it. */
        if (cur == 0 || (cur != me && !ofl_pid_alive(cur, NULL))) {
            if (__atomic_compare_exchange_n(&s->owner, &cur, me, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                break;
            continue;
        }
        return -EBUSY;
    }
    e->region = r;
    e->ctl = c;
    e->line_mine = &c->line[side].l;
    e->line_peer = &c->line[!side].l;
    e->stage = chan_stage_at(r, id);
    e->stage_size = r->stage_size;
    e->abort_flag = abort_flag;
    e->id = id;
    e->side = side;
    uint64_t seed = ofl_now_ns() ^ (uint64_t)(uintptr_t)e ^ ((uint64_t)me << 40);
    e->cookie = (uint32_t)ofl_fmix64(seed) | 1u;
    STORE(&s->pid, me, RELAXED);
    STORE(&s->flags, 0, RELAXED);
    STORE(&s->rx_waiting, 0, RELAXED);
    STORE(&s->cookie, e->cookie, RELAXED);
    STORE(&s->why, 0, RELAXED);
    STORE(&s->end_addr, (uint64_t)(uintptr_t)e, RELAXED);
    for (int d = 0; d < 2; d++) STORE(&s->st[d].copying, 0, RELAXED);
    /* A message a dead previous owner left pending is not ours to deliver. */
    if (chan_out_pending(e)) chan_line_withdraw(e);
    /* The hints: our header as it is, our last message not known taken (the first
     * send asks the lines). */
    e->tx_hdr = LOAD(&c->line[side].l.hdr, ACQUIRE);
    e->tx_seq = h_seq(e->tx_hdr);
    e->tx_done = (e->tx_seq - 1) & SEQ_MASK;
    uint32_t g = LOAD(&s->gen, RELAXED);
    g = (g & 1u) ? g + 2 : g + 1;
    STORE(&s->gen, g, SEQ_CST);
    STORE(&e->gen, g, RELEASE);
    return 0;
}

/* Side A after closing or failing a transfer: wait (bounded) until B no longer
 * copies to or from our memory, so the caller may free its buffer. */
void chan_quiesce_peer_copy(const struct ofl_chan_end *e, int dir, uint32_t xfer, bool any)
{
    const struct chan_side *p = side_peer(e);
    uint64_t t0 = ofl_now_ns();
    pid_t pid = LOAD(&p->pid, RELAXED);
    for (uint32_t i = 0;; i++) {
        uint64_t c = LOAD(&p->st[dir].copying, SEQ_CST);
        if (c == 0 || (!any && prog_xfer(c) != xfer)) return;
        if ((LOAD(&p->gen, ACQUIRE) & 1u) == 0) return;
        if ((i & 1023u) == 1023u) {
            if (!ofl_pid_alive(pid, NULL) || ofl_now_ns() - t0 > 1000000000ull) return;
        }
        if (i < OFL_WAIT_SPINS)
            ofl_cpu_relax();
        else
            sched_yield();
    }
}

void ofl_chan_close_why(struct ofl_chan_end *e, int err)
{
    if (!end_valid(e)) return;
    /* (before the close publishes gen: a peer that sees the side closed sees why) */
    if (LOAD(&e->gen, ACQUIRE) & 1u) STORE(&side_mine(e)->why, err < 0 ? err : -err, RELAXED);
    ofl_chan_close(e);
}

int ofl_chan_peer_why(const struct ofl_chan_end *e)
{
    if (!end_valid(e)) return 0;
    const struct chan_side *p = side_peer(e);
    uint32_t g = LOAD(&p->gen, ACQUIRE);
    return g && !(g & 1u) ? LOAD(&p->why, RELAXED) : 0;
}

void ofl_chan_close(struct ofl_chan_end *e)
{
    if (!end_valid(e)) return;
    uint32_t g = LOAD(&e->gen, ACQUIRE);
    if (!(g & 1u)) return;
    struct chan_side *s = side_mine(e);
    STORE(&e->gen, g + 1, RELEASE);
    /* The mapping of the peer's registered memory, unless a call still runs (it
     * drops the mapping on its way out: see bulk_call). */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!LOAD(&e->busy[0], RELAXED) && !LOAD(&e->busy[1], RELAXED)) chan_mem_unmap(e);
    uint32_t cur = g;
    /* Another process took the side over (we were thought dead): leave it alone. */
    if (!__atomic_compare_exchange_n(&s->gen, &cur, g + 1, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_RELAXED))
        return;
    STORE(&s->rx_waiting, 0, RELAXED);
    chan_ack_publish(e);
    /* A post nobody waits on is withdrawn here; a blocked send withdraws its own
     * when it sees the end closed. A sender marks itself busy before its post
     * (whose CAS releases), so a pending message seen here with no sender busy
     * is a post. */
    if (chan_out_pending(e) && !LOAD(&e->busy[0], ACQUIRE) && chan_line_withdraw(e))
        stat_add(&e->stats.withdrawn, 1);
    if (e->side == OFL_CHAN_A) {
        chan_quiesce_peer_copy(e, 0, 0, true);
        chan_quiesce_peer_copy(e, 1, 0, true);
    }
    int32_t me = (int32_t)getpid();
    __atomic_compare_exchange_n(&s->owner, &me, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

int ofl_chan_set_chunk(struct ofl_chan_end *e, uint32_t k)
{
    if (!end_valid(e) || k < 1 || k > OFL_CHAN_SG_MAX) return -EINVAL;
    STORE(&e->sg_per_chunk, k, RELAXED);
    return 0;
}

int ofl_chan_set_intr(struct ofl_chan_end *e, int fd)
{
    if (!end_valid(e) || fd < -1) return -EINVAL;
    STORE(&e->intr_fd, fd, RELAXED);
    return 0;
}

int ofl_chan_set_copy(struct ofl_chan_end *e, int mode)
{
    if (!end_valid(e) || mode < OFL_CHAN_COPY_AUTO || mode > OFL_CHAN_COPY_BOUNCE)
        return -EINVAL;
    STORE(&e->copy, mode, RELAXED);
    uint32_t f = mode == OFL_CHAN_COPY_BOUNCE ? SIDE_WANT_BOUNCE
                 : mode == OFL_CHAN_COPY_VM   ? SIDE_WANT_VM
                                              : 0u;
    STORE(&side_mine(e)->flags, f, RELEASE);
    return 0;
}

void ofl_chan_inject_corruption(struct ofl_chan_end *e, uint64_t offset)
{
    if (e) STORE(&e->corrupt_at, offset, RELAXED);
}

void ofl_chan_bulk_progress(const struct ofl_chan_end *e, struct ofl_chan_bulk_stat *st)
{
    st->done = LOAD(&e->progress.done, RELAXED);
    st->outstanding = LOAD(&e->progress.outstanding, RELAXED);
    st->status = LOAD(&e->progress.status, RELAXED);
    st->chunks = LOAD(&e->progress.chunks, RELAXED);
}

void ofl_chan_get_stats(const struct ofl_chan_end *e, struct ofl_chan_stats *st)
{
    const struct ofl_chan_stats *s = &e->stats;
    st->sent = LOAD(&s->sent, RELAXED);
    st->posted = LOAD(&s->posted, RELAXED);
    st->received = LOAD(&s->received, RELAXED);
    st->withdrawn = LOAD(&s->withdrawn, RELAXED);
    st->bulk_sent = LOAD(&s->bulk_sent, RELAXED);
    st->bulk_received = LOAD(&s->bulk_received, RELAXED);
    st->bulk_failed = LOAD(&s->bulk_failed, RELAXED);
    st->chunks = LOAD(&s->chunks, RELAXED);
    st->bytes_memcpy = LOAD(&s->bytes_memcpy, RELAXED);
    st->bytes_vm = LOAD(&s->bytes_vm, RELAXED);
    st->bytes_bounce = LOAD(&s->bytes_bounce, RELAXED);
    st->bytes_mem = LOAD(&s->bytes_mem, RELAXED);
    st->paths = LOAD(&s->paths, RELAXED);
}

/* ---- message lines ---- */

int chan_line_withdraw(struct ofl_chan_end *e)
{
    uint32_t s = h_seq(LOAD(&line_mine(e)->hdr, RELAXED));
    uint32_t *pc = claim_peer(e);
    uint32_t c = LOAD(pc, ACQUIRE);
    for (;;) {
        if ((c & SEQ_MASK) == s) return 0;
        if (__atomic_compare_exchange_n(pc, &c, s, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            break;
    }
    /* Publish the withdrawal in the receiver's header, as it would (its own
     * publication reloads the claim when this CAS moved the header under it). */
    struct chan_line *p = line_peer(e);
    uint64_t ph = LOAD(&p->hdr, ACQUIRE);
    while (h_ack(ph) != s) {
        uint64_t nh = h_make(h_seq(ph), s, h_len(ph), h_kind(ph));
        if (__atomic_compare_exchange_n(&p->hdr, &ph, nh, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            break;
    }
    return 1;
}

/* ---- waiting ---- */

int chan_peer_check(const struct ofl_chan_end *e, struct chan_wait *cw)
{
    const struct chan_side *p = side_peer(e);
    uint32_t g = LOAD(&p->gen, ACQUIRE);
    if (cw->peer_gen) return g == cw->peer_gen ? PEER_OPEN : -EPIPE;
    if (g & 1u) {
        cw->peer_gen = g;
        cw->peer_pid = LOAD(&p->pid, RELAXED);
        return PEER_OPEN;
    }
    return g == 0 ? PEER_ABSENT : -EPIPE;
}

/* Pauses a direct-message wait spins before it yields the CPU at every wait (about
 * 3 us: longer than an exchange with a running peer takes). A thread that shares its
 * CPU with others, its peer among them, then hands the CPU over instead of spinning
 * out the OFL_WAIT_SPINS of ofl_wait (about 50 us). Bulk waits spin those out (see
 * bulk_call). */
#define CHAN_SPINS 128u

void chan_wait_init(struct chan_wait *cw, const struct ofl_chan_end *e, uint64_t timeout_ns)
{
    /* No clock read here: a call that never waits never reads the clock, and the
     * deadline counts from the first wait (a few ns later). ofl_waiter_init would
     * read it, so the waiter is set up by hand: no peer fds, our abort word. */
    for (int i = 0; i < OFL_WAIT_MAX_PEERS; i++) cw->w.peer_fds[i] = -1;
    cw->w.npeers = 0;
    cw->w.abort_flag = e->abort_flag;
    cw->w.spins = 0;
    cw->w.next_check_ns = 0;
    cw->w.calls = 0;
    cw->w.dead = 0;
    cw->w.intr_fd = LOAD(&e->intr_fd, RELAXED);
    cw->w.idle_since = 0;
    cw->w.dead_peers = 0;
    cw->w.timed = cw->w.in_wait = false;   /* channel waits are not accounted */
    cw->w.wait_t0 = cw->w.waited_ns = 0;
    cw->timeout = timeout_ns;
    cw->deadline = 0;
    cw->next_live = 0;
    cw->n = 1;   /* the first clock read comes with the 16th wait, not the first */
    cw->spin_max = CHAN_SPINS;
    cw->peer_gen = 0;
    cw->peer_pid = 0;
    cw->pidfd = -1;
}

/* Start the deadline and the liveness clock at the first clock read. */
static void wait_arm(struct chan_wait *cw, uint64_t now)
{
    cw->deadline = cw->timeout > UINT64_MAX - now ? UINT64_MAX : now + cw->timeout;
    cw->next_live = now + OFL_WAIT_CHECK_NS;
}

int chan_wait(struct chan_wait *cw, const struct ofl_chan_end *e)
{
    if (cw->timeout == 0) return -ETIMEDOUT;   /* tried once */
    if (cw->w.spins >= cw->spin_max && cw->w.spins < OFL_WAIT_SPINS) cw->w.spins = OFL_WAIT_SPINS;
    int rc = ofl_wait(&cw->w);
    if (rc) return rc;
    if (!chan_end_open(e)) return -EPIPE;
    rc = chan_peer_check(e, cw);
    if (rc < 0) return rc;
    /* While spinning, read the clock every 16th call; once yielding, every call. */
    if (cw->w.spins < OFL_WAIT_SPINS && (cw->n++ & 15u)) return 0;
    uint64_t now = ofl_now_ns();
    if (!cw->deadline) wait_arm(cw, now);
    if (now >= cw->deadline) return -ETIMEDOUT;
    if (now >= cw->next_live) {
        cw->next_live = now + OFL_WAIT_CHECK_NS;
        if (cw->peer_gen && !ofl_pid_alive(cw->peer_pid, &cw->pidfd)) return -EPIPE;
    }
    return 0;
}

void chan_wait_progress(struct chan_wait *cw, bool push_deadline)
{
    cw->w.spins = 0;
    /* The deadline restarts at the next clock read. */
    if (push_deadline) cw->deadline = 0;
}

void chan_wait_extend(struct chan_wait *cw, uint64_t timeout_ns)
{
    cw->timeout = timeout_ns;
    cw->deadline = 0;
}

void chan_wait_done(struct chan_wait *cw)
{
    if (cw->pidfd >= 0) close(cw->pidfd);
    cw->pidfd = -1;
}

int ofl_chan_peer_state(const struct ofl_chan_end *e)
{
    if (!end_valid(e)) return -EINVAL;
    const struct chan_side *p = side_peer(e);
    uint32_t g = LOAD(&p->gen, ACQUIRE);
    if (g == 0) return 0;
    if (!(g & 1u) || !ofl_pid_alive(LOAD(&p->pid, RELAXED), NULL)) return -EPIPE;
    return 1;
}

uint32_t ofl_chan_peer_session(const struct ofl_chan_end *e)
{
    return end_valid(e) ? LOAD(&side_peer(e)->gen, ACQUIRE) : 0;
}

/* The peer session a try call found dead is still the one there. */
static bool known_dead(const struct ofl_chan_end *e)
{
    uint32_t d = LOAD(&e->dead_gen, RELAXED);
    return d && d == LOAD(&side_peer(e)->gen, ACQUIRE);
}

/* A try call that found the peer not ready: has the peer closed, or its process gone?
 * The kernel is asked at most every OFL_WAIT_CHECK_NS per end (a loop of try calls
 * costs a clock read each); a death found stays found for that peer session. */
static bool try_peer_gone(struct ofl_chan_end *e)
{
    uint32_t g = LOAD(&side_peer(e)->gen, ACQUIRE);
    if (g && !(g & 1u)) return true;
    if (!g) return false;
    if (known_dead(e)) return true;
    uint64_t now = ofl_now_ns();
    if (now < LOAD(&e->try_check_ns, RELAXED)) return false;
    STORE(&e->try_check_ns, now + OFL_WAIT_CHECK_NS, RELAXED);
    if (ofl_pid_alive(LOAD(&side_peer(e)->pid, RELAXED), NULL)) return false;
    STORE(&e->dead_gen, g, RELAXED);
    return true;
}

/* ---- direct messages ---- */

/* Waits of a send before it also reads the receiver's claim word (the published ack
 * covers the common cases; reading the claim line sooner would take it away from a
 * receiver about to write it). */
#define SLOW_CHECK_AFTER 32u
/* A blocking call first spins this many pauses on the line alone (no clock, no
 * liveness checks, no waiting state to set up): an exchange with a running peer
 * completes within them. Only for timeouts of at least FAST_MIN_TIMEOUT (shorter
 * ones keep their exact meaning) and never for try_send / try_recv. */
#define FAST_SPINS 64u
#define FAST_MIN_TIMEOUT 100000ull
/* Spins of a send's fast path on the published ack before it also reads the
 * receiver's claim word: a receiver that takes a message and then does other work
 * publishes its ack only with its next send or receive, and without this the sender
 * waited out the spins and then the slow path's checks (about 2 us, measured). Past
 * these spins (~0.5 us) a receiver in a loop would have published already. */
#define FAST_CLAIM_AFTER 16u

/* Wait until the message we posted is taken (0) or give up and withdraw it. */
static int send_wait(struct ofl_chan_end *e, struct chan_wait *cw)
{
    bool graced = false;
    for (uint32_t n = 0;; n++) {
        if (!chan_out_pending_fast(e)) break;
        if (n >= SLOW_CHECK_AFTER && !chan_out_pending(e)) break;
        int rc = chan_wait(cw, e);
        if (!rc) continue;
        if (rc == -ETIMEDOUT && !graced && LOAD(&side_peer(e)->rx_waiting, RELAXED)) {
            /* The receiver is waiting: it may just be descheduled. */
            graced = true;
            chan_wait_extend(cw, OFL_CHAN_GRACE_NS);
            continue;
        }
        if (chan_line_withdraw(e)) {
            stat_add(&e->stats.withdrawn, 1);
            return rc;
        }
        break;   /* taken before we could withdraw it: delivered */
    }
    return 0;
}

static int send_body(struct ofl_chan_end *e, struct chan_wait *cw, const void *msg, size_t len)
{
    if (!chan_end_open(e)) return -EPIPE;
    int rc = chan_peer_check(e, cw);
    if (rc < 0) return rc;
    /* An earlier ofl_chan_post still waits to be taken: the line is busy. */
    while (chan_out_pending(e)) {
        rc = chan_wait(cw, e);
        if (rc) return rc;
    }
    chan_line_post(e, KIND_MSG, msg, len);
    return send_wait(e, cw);
}

/* Is our end open, as far as this process knows? Fast paths read only our own word:
 * another process takes a side over only when its owner is dead (chan_end_open). */
static bool end_open_here(const struct ofl_chan_end *e)
{
    return LOAD(&e->gen, ACQUIRE) & 1u;
}

/* The fast path of a send: with our end open and our line free, post and spin on
 * the acknowledgement. Returns 0 (taken), 1 (posted, not taken yet: the peer
 * session is in *gen, 0 when the peer is not open) or 2 (nothing done: take the
 * general path). Loads of lines the peer polls sit after the post, not before it:
 * before it they cost about a line transfer each (measured). */
static int send_fast(struct ofl_chan_end *e, const void *msg, size_t len, uint32_t *gen)
{
    if (!end_open_here(e)) return 2;
    /* Our last message known taken, else ask the lines. */
    uint32_t s = LOAD(&e->tx_seq, RELAXED);
    if (LOAD(&e->tx_done, RELAXED) != s && chan_out_pending(e)) return 2;
    chan_line_post(e, KIND_MSG, msg, len);
    s = LOAD(&e->tx_seq, RELAXED);
    uint32_t g = LOAD(&side_peer(e)->gen, ACQUIRE);
    *gen = g & 1u ? g : 0;
    for (uint32_t k = 0; k < FAST_SPINS && *gen; k++) {
        if (h_ack(LOAD(&line_peer(e)->hdr, ACQUIRE)) == s ||
            (k >= FAST_CLAIM_AFTER && !chan_out_pending(e))) {
            STORE(&e->tx_done, s, RELAXED);
            return 0;
        }
        ofl_cpu_relax();
    }
    return chan_out_pending(e) ? 1 : 0;
}

static int send_impl(struct ofl_chan_end *e, const void *msg, size_t len, uint64_t timeout,
                     bool try_)
{
    if (!end_valid(e) || (len && !msg)) return -EINVAL;
    if (len > OFL_CHAN_MSG_MAX) return -EMSGSIZE;
    if (try_ && known_dead(e)) return -EPIPE;   /* not the receiver's grace again */
    if (chan_busy_get(e, BUSY_TX)) return -EBUSY;
    uint32_t gen = 0;
    int rc = timeout >= FAST_MIN_TIMEOUT ? send_fast(e, msg, len, &gen) : 2;
    if (rc) {
        struct chan_wait cw;
        chan_wait_init(&cw, e, timeout);
        if (rc == 1) {
            /* Posted by the fast path: wait for that peer session only (or, when
             * the peer was not open, until one opens; a closed one fails it). */
            cw.peer_gen = gen;
            cw.peer_pid = gen ? LOAD(&side_peer(e)->pid, RELAXED) : 0;
            rc = send_wait(e, &cw);
        } else {
            rc = send_body(e, &cw, msg, len);
        }
        chan_wait_done(&cw);
    }
    if (rc == 0) stat_add(&e->stats.sent, 1);
    chan_busy_put(e, BUSY_TX);
    if (try_ && rc == -ETIMEDOUT) rc = try_peer_gone(e) ? -EPIPE : -EAGAIN;
    return rc;
}

int ofl_chan_send(struct ofl_chan_end *e, const void *msg, size_t len, uint64_t timeout_ns)
{
    return send_impl(e, msg, len, timeout_ns, false);
}

int ofl_chan_try_send(struct ofl_chan_end *e, const void *msg, size_t len)
{
    return send_impl(e, msg, len, 0, true);
}

/* A pending direct message: its length once taken into buf, 0 on none (or lost to a
 * withdrawal: look again), or -EPROTO / -EMSGSIZE (it stays pending). Sets *got.
 * The payload is copied straight into buf, so after a lost race buf holds bytes of
 * a withdrawn message: a receive that returns no message leaves buf unspecified. */
static int recv_once(struct ofl_chan_end *e, void *buf, size_t cap, bool *got)
{
    uint64_t ph;
    uint32_t a;
    *got = false;
    if (!chan_line_peek(e, &ph, &a)) return 0;
    if (h_kind(ph) != KIND_MSG || h_len(ph) > OFL_CHAN_MSG_MAX) return -EPROTO;
    unsigned len = h_len(ph);
    if (len > cap) return -EMSGSIZE;
    payload_copy(buf, line_peer(e)->payload, len);
    if (!chan_line_claim(e, ph, a)) return 0;
    stat_add(&e->stats.received, 1);
    *got = true;
    return (int)len;
}

/* `waiting`: our rx_waiting flag is set already (the fast path set it). */
static int recv_body(struct ofl_chan_end *e, struct chan_wait *cw, void *buf, size_t cap,
                     bool try_, bool waiting)
{
    struct chan_side *s = side_mine(e);
    int rc = chan_end_open(e) ? 0 : -EPIPE;
    while (rc == 0) {
        bool got;
        int n = recv_once(e, buf, cap, &got);
        if (got || n < 0) {
            rc = n;
            break;
        }
        if (try_) {
            rc = chan_peer_check(e, cw) < 0 || try_peer_gone(e) ? -EPIPE : -EAGAIN;
            break;
        }
        if (!waiting) {
            STORE(&s->rx_waiting, 1u, RELAXED);
            waiting = true;
        }
        rc = chan_wait(cw, e);
        if (rc) {
            /* A message that arrived before the error still counts: look once more.
             * (`got` ends the loop, not the length: a zero-length message taken here
             * was lost when its length 0 read as "no message, wait on".) */
            n = recv_once(e, buf, cap, &got);
            if (got || n < 0) {
                rc = n;
                break;
            }
        }
    }
    if (waiting) STORE(&s->rx_waiting, 0u, RELAXED);
    return rc;
}

static int recv_impl(struct ofl_chan_end *e, void *buf, size_t cap, uint64_t timeout, bool try_)
{
    if (!end_valid(e) || (cap && !buf)) return -EINVAL;
    if (chan_busy_get(e, BUSY_RX)) return -EBUSY;
    bool got = false, waiting = false;
    int rc = 0;
    if (end_open_here(e)) {
        /* The message we took last is acknowledged now at the latest. */
        chan_ack_publish_lazy(e);
        rc = recv_once(e, buf, cap, &got);
        if (!got && rc == 0 && !try_ && timeout >= FAST_MIN_TIMEOUT) {
            STORE(&side_mine(e)->rx_waiting, 1u, RELAXED);
            waiting = true;
            for (uint32_t k = 0; k < FAST_SPINS && !got && rc == 0; k++) {
                ofl_cpu_relax();
                rc = recv_once(e, buf, cap, &got);
            }
        }
    }
    if (!got && rc == 0) {
        struct chan_wait cw;
        chan_wait_init(&cw, e, timeout);
        rc = recv_body(e, &cw, buf, cap, try_, waiting);
        chan_wait_done(&cw);
    } else if (waiting) {
        STORE(&side_mine(e)->rx_waiting, 0u, RELAXED);
    }
    chan_busy_put(e, BUSY_RX);
    return rc;
}

int ofl_chan_recv(struct ofl_chan_end *e, void *buf, size_t cap, uint64_t timeout_ns)
{
    return recv_impl(e, buf, cap, timeout_ns, false);
}

int ofl_chan_try_recv(struct ofl_chan_end *e, void *buf, size_t cap)
{
    return recv_impl(e, buf, cap, 0, true);
}

int ofl_chan_post(struct ofl_chan_end *e, const void *msg, size_t len)
{
    if (!end_valid(e) || (len && !msg)) return -EINVAL;
    if (len > OFL_CHAN_MSG_MAX) return -EMSGSIZE;
    if (chan_busy_get(e, BUSY_TX)) return -EBUSY;
    int rc = 0;
    /* Taken when the peer's published ack (its line, which a receiver has just
     * read) shows our last message; only else our own line, whose load right
     * before we write it costs a line transfer (the peer polls it): measured, a
     * reply posted this way shortened a round trip by ~10%. */
    if (!chan_end_open(e))
        rc = -EPIPE;
    else if (h_ack(LOAD(&line_peer(e)->hdr, ACQUIRE)) != LOAD(&e->tx_seq, RELAXED) &&
             chan_out_pending(e))
        rc = -ENOBUFS;
    else {
        chan_line_post(e, KIND_MSG, msg, len);
        stat_add(&e->stats.posted, 1);
    }
    chan_busy_put(e, BUSY_TX);
    return rc;
}

int ofl_chan_post_done(const struct ofl_chan_end *e)
{
    return end_valid(e) && !chan_out_pending(e);
}
