/* Channel managers: a few threads serve many channel ends with non-blocking steps.
 *
 * Served ends are split among the threads by index (end i goes to thread
 * i % nthreads). A thread sweeps its ends: a pending direct message is taken and
 * given to the end's handler (which may post a reply: the peer takes it with its
 * next receive, no thread waits for that); an announced bulk transfer gets a buffer
 * from the bulk handler and then advances one step per sweep, its liveness checked
 * about every millisecond. A bulk send queued by ofl_chan_mgr_bulk_send (any thread)
 * waits in the end's one-entry mailbox until its thread finds the end idle, then
 * runs the same way. A sweep without work spins, then yields, then naps (wait.h: a
 * message to an idle manager is taken within 1 ms). Nothing here waits
 * for a peer, so blocked senders on the other side never hold a thread. */
#include "chan_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define LOAD(p, o) __atomic_load_n((p), __ATOMIC_##o)
#define STORE(p, v, o) __atomic_store_n((p), (v), __ATOMIC_##o)

#define MGR_MAX_THREADS 64u
/* Places in the index of served ends: a power of two, twice the most ends. */
#define MGR_INDEX (2u * OFL_CHAN_MGR_MAX_ENDS)
_Static_assert((MGR_INDEX & (MGR_INDEX - 1)) == 0, "the index size is a power of two");

/* The send mailbox of a served end. */
enum { SEND_FREE = 0, SEND_FILLING = 1, SEND_READY = 2 };

/* Who may post on a served end now: its handler (while it runs) or a relay
 * (ofl_chan_mgr_post), never both, so that what the handler posted is known exactly. */
enum { POST_FREE = 0, POST_HANDLER = 1, POST_RELAY = 2 };

struct mgr_slot {
    struct ofl_chan_end end;
    ofl_chan_handler on_msg;
    struct ofl_chan_bulk_handler bulk;
    void *ctx;
    bool active;               /* false once a handler's error closed the end */
    bool op_active;            /* a bulk transfer is in progress */
    bool op_send;              /* ... and it is a queued send */
    bool replied;              /* the handler posted a reply to the last message ... */
    uint32_t reply_gen;        /* ... for this session of the peer (its gen) */
    uint32_t poster;           /* POST_*: taken by the handler's run or a relay's post */
    uint32_t op_bits;          /* the busy bits it holds */
    void *op_buf;
    size_t op_len;
    uint32_t send_state;       /* SEND_*: a requester fills it, the thread empties it */
    const void *send_buf;
    size_t send_len;
    uint64_t next_live;        /* next liveness check of the transfer's peer */
    struct chan_bulk op;
};

struct mgr_worker {
    struct ofl_chan_mgr *m;
    unsigned idx;
    pthread_t thread;
};

struct ofl_chan_mgr {
    unsigned nthreads;
    unsigned started;
    const volatile uint32_t *abort_flag;
    uint32_t stop;
    uint32_t count;            /* slots published (release) */
    pthread_mutex_t lock;      /* serializes ofl_chan_mgr_serve; guards slots and index */
    struct mgr_worker workers[MGR_MAX_THREADS];
    struct mgr_slot *slots[OFL_CHAN_MGR_MAX_ENDS];
    uint32_t index[MGR_INDEX]; /* slot + 1 by (channel, side), open addressing; 0: free
                                  (under lock: ofl_chan_mgr_bulk_send finds ends in O(1)) */
};

/* The first place of (ctl, side) in the index. */
static uint32_t index_home(const struct chan_ctl *ctl, int side)
{
    uint64_t x = ((uint64_t)(uintptr_t)ctl >> 6) * 2u + (uint64_t)(side & 1);
    x *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(x >> 40) & (MGR_INDEX - 1);
}

/* The place of (ctl, side) in the index: where it is, else the free place that ends
 * its probe (the lock held; never full: it has twice the places of the most slots). */
static uint32_t index_place(const struct ofl_chan_mgr *m, const struct chan_ctl *ctl, int side)
{
    uint32_t i = index_home(ctl, side);
    for (; m->index[i]; i = (i + 1) & (MGR_INDEX - 1)) {
        const struct mgr_slot *s = m->slots[m->index[i] - 1];
        if (s->end.ctl == ctl && s->end.side == side) break;
    }
    return i;
}

static void op_over(struct mgr_slot *s, int status)
{
    s->op_active = false;
    chan_busy_put(&s->end, s->op_bits);
    if (s->op_send) {
        if (s->bulk.sent) s->bulk.sent(s->ctx, &s->end, s->op_buf, s->op_len, status);
    } else if (s->bulk.done) {
        s->bulk.done(s->ctx, &s->end, s->op_buf, s->op_len, status);
    }
}

/* A queued send that will not run: its sent handler gets `status`. */
static void send_drop(struct mgr_slot *s, int status)
{
    const void *buf = s->send_buf;
    size_t len = s->send_len;
    STORE(&s->send_state, SEND_FREE, RELEASE);
    if (s->bulk.sent) s->bulk.sent(s->ctx, &s->end, buf, len, status);
}

/* Advance the slot's bulk transfer by one step. Returns 1 on progress. */
static int poll_bulk(struct mgr_slot *s, uint64_t *now)
{
    struct ofl_chan_end *e = &s->end;
    int rc = chan_bulk_step(e, &s->op);
    if (rc == STEP_IDLE) {
        if (!*now) *now = ofl_now_ns();
        if (*now < s->next_live) return 0;
        s->next_live = *now + OFL_WAIT_CHECK_NS;
        if (!s->op.peer_pid || ofl_pid_alive(s->op.peer_pid, NULL)) return 0;
        chan_bulk_fail(e, &s->op, -EPIPE);
        rc = -EPIPE;
    }
    if (rc == STEP_DONE || rc < 0) op_over(s, rc == STEP_DONE ? 0 : rc);
    return 1;
}

/* Take the pending message without looking at it (malformed or left over). */
static void drop_pending(struct ofl_chan_end *e, uint64_t ph, uint32_t ack)
{
    uint8_t junk[OFL_CHAN_MSG_MAX];
    if (chan_busy_get(e, BUSY_RX)) return;
    chan_line_take_ack(e, ph, ack, junk);
    chan_busy_put(e, BUSY_RX);
}

static int poll_msg(struct mgr_slot *s, uint64_t ph, uint32_t ack)
{
    struct ofl_chan_end *e = &s->end;
    unsigned len = h_len(ph);
    if (len > OFL_CHAN_MSG_MAX) {
        drop_pending(e, ph, ack);
        return 1;
    }
    /* The next message waits until the peer took the handler's reply to the last
     * one: the handler may reply to it too, and one post at a time fits the line
     * (its REPLY failed with ENOBUFS, which closed the end: the reply withdrawn,
     * the peer's next message lost with it). */
    if (s->replied && chan_out_pending(e)) {
        /* (a peer that took the side over from a dead one never sees that reply) */
        if (LOAD(&side_peer(e)->gen, ACQUIRE) == s->reply_gen || chan_busy_get(e, BUSY_TX))
            return 0;
        if (chan_out_pending(e) && chan_line_withdraw(e)) stat_add(&e->stats.withdrawn, 1);
        chan_busy_put(e, BUSY_TX);
    }
    s->replied = false;
    if (!s->on_msg || chan_busy_get(e, BUSY_RX)) return 0;
    /* No relay posts while the handler runs (its post waits: -EBUSY), so a post made
     * meanwhile is the handler's reply; a relay's post in progress: look again. */
    uint32_t free_ = POST_FREE;
    if (!__atomic_compare_exchange_n(&s->poster, &free_, POST_HANDLER, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
        chan_busy_put(e, BUSY_RX);
        return 0;
    }
    uint8_t buf[OFL_CHAN_MSG_MAX];
    int got = chan_line_take(e, ph, ack, buf);
    chan_busy_put(e, BUSY_RX);
    if (!got) {
        STORE(&s->poster, POST_FREE, RELEASE);
        return 1;
    }
    stat_add(&e->stats.received, 1);
    uint32_t seq = LOAD(&e->tx_seq, RELAXED);
    /* A reply the handler posts carries the acknowledgement; else it goes now. */
    int rc = s->on_msg(s->ctx, e, buf, len);
    s->replied = LOAD(&e->tx_seq, RELAXED) != seq;
    STORE(&s->poster, POST_FREE, RELEASE);
    s->reply_gen = LOAD(&side_peer(e)->gen, ACQUIRE);
    if (rc < 0) {   /* (the host's next call on it fails, saying why: peer_why) */
        ofl_chan_close_why(e, rc);
        STORE(&s->active, false, RELAXED);
    } else {
        chan_ack_publish(e);
    }
    return 1;
}

/* The slot's transfer was started (chan_bulk_start returned `rc`) holding the guards
 * `bits`: record it; one that could not start ends at once. Returns 1 (progress). */
static int op_started(struct mgr_slot *s, bool send, void *buf, size_t len, uint32_t bits,
                      int rc, uint64_t *now)
{
    s->op_send = send;
    s->op_buf = buf;
    s->op_len = len;
    s->op_bits = bits;
    s->op_active = true;
    if (!*now) *now = ofl_now_ns();
    s->next_live = *now + OFL_WAIT_CHECK_NS;
    if (rc < 0) op_over(s, rc);
    return 1;
}

/* Start the send queued in the mailbox (the end is idle). */
static int start_send(struct mgr_slot *s, uint64_t *now)
{
    struct ofl_chan_end *e = &s->end;
    uint32_t bits = chan_bulk_bits(e, BULK_SEND);
    if (chan_busy_get(e, bits)) return 0;
    void *buf = (void *)(uintptr_t)s->send_buf;
    size_t len = s->send_len;
    STORE(&s->send_state, SEND_FREE, RELEASE);   /* the next one may queue */
    int rc = chan_bulk_start(e, &s->op, BULK_SEND, buf, len, NULL);
    return op_started(s, true, buf, len, bits, rc, now);
}

/* A bulk transfer toward the end was announced: ask for a buffer and start. */
static int start_bulk(struct mgr_slot *s, uint64_t total, uint64_t *now)
{
    struct ofl_chan_end *e = &s->end;
    uint32_t bits = chan_bulk_bits(e, BULK_RECV);
    if (chan_busy_get(e, bits)) return 0;
    void *buf = NULL;
    if (s->bulk.begin && total <= SIZE_MAX) buf = s->bulk.begin(s->ctx, e, (size_t)total);
    int rc = chan_bulk_start(e, &s->op, BULK_RECV, buf, buf ? total : 0, NULL);
    if (rc < 0) {
        /* A size the state machine cannot take: refuse it like a NULL buffer. */
        buf = NULL;
        rc = chan_bulk_start(e, &s->op, BULK_RECV, NULL, 0, NULL);
    }
    s->op.refuse = buf == NULL;
    return op_started(s, false, buf, buf ? (size_t)total : 0, bits, rc, now);
}

/* One look at one served end. Returns 1 when something happened. */
static int poll_slot(struct mgr_slot *s, uint64_t *now)
{
    bool ready = LOAD(&s->send_state, ACQUIRE) == SEND_READY;
    if (!LOAD(&s->active, RELAXED)) {
        if (ready) send_drop(s, -EPIPE);
        return ready;
    }
    struct ofl_chan_end *e = &s->end;
    if (s->op_active) return poll_bulk(s, now);
    if (ready) return start_send(s, now);
    uint64_t ph;
    uint32_t ack;
    if (!chan_line_peek(e, &ph, &ack)) {
        /* The peer closed: a reply it never took is withdrawn, and counted. */
        uint32_t g = LOAD(&side_peer(e)->gen, ACQUIRE);
        if (g && !(g & 1u) && chan_out_pending(e) && !chan_busy_get(e, BUSY_TX)) {
            if (chan_out_pending(e) && chan_line_withdraw(e)) stat_add(&e->stats.withdrawn, 1);
            chan_busy_put(e, BUSY_TX);
        }
        return 0;
    }
    if (h_kind(ph) == KIND_MSG) return poll_msg(s, ph, ack);
    uint64_t total;
    if (chan_bulk_incoming(e, &total)) return start_bulk(s, total, now);
    drop_pending(e, ph, ack);   /* a chunk of a transfer given up, or garbage */
    return 1;
}

static void *worker_main(void *arg)
{
    struct mgr_worker *w = arg;
    struct ofl_chan_mgr *m = w->m;
    struct ofl_waiter wt;
    ofl_waiter_init(&wt, NULL, 0, m->abort_flag);
    while (!LOAD(&m->stop, ACQUIRE)) {
        uint32_t n = LOAD(&m->count, ACQUIRE);
        uint64_t now = 0;
        int work = 0;
        for (uint32_t i = w->idx; i < n; i += m->nthreads) work |= poll_slot(m->slots[i], &now);
        if (work)
            ofl_waiter_progress(&wt);
        else if (ofl_wait(&wt) < 0)
            ofl_sleep_ns(OFL_WAIT_NAP_MAX_NS);   /* aborted: idle until stopped */
    }
    return NULL;
}

struct ofl_chan_mgr *ofl_chan_mgr_start(unsigned nthreads, const volatile uint32_t *abort_flag)
{
    if (nthreads < 1 || nthreads > MGR_MAX_THREADS) return NULL;
    struct ofl_chan_mgr *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->nthreads = nthreads;
    m->abort_flag = abort_flag;
    if (pthread_mutex_init(&m->lock, NULL)) {
        free(m);
        return NULL;
    }
    for (unsigned i = 0; i < nthreads; i++) {
        m->workers[i].m = m;
        m->workers[i].idx = i;
        if (pthread_create(&m->workers[i].thread, NULL, worker_main, &m->workers[i])) {
            ofl_chan_mgr_stop(m);
            return NULL;
        }
        m->started = i + 1;
    }
    return m;
}

int ofl_chan_mgr_serve(struct ofl_chan_mgr *m, void *region, uint32_t id, int side,
                       ofl_chan_handler on_msg, const struct ofl_chan_bulk_handler *on_bulk,
                       void *ctx)
{
    if (!m) return -EINVAL;
    struct mgr_slot *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    int rc = ofl_chan_open(&s->end, region, id, side, m->abort_flag);
    if (rc) {
        free(s);
        return rc;
    }
    s->on_msg = on_msg;
    if (on_bulk) s->bulk = *on_bulk;
    s->ctx = ctx;
    s->active = true;
    /* A served end always receives: senders may hand it messages with try_send. */
    STORE(&side_mine(&s->end)->rx_waiting, 1u, RELAXED);
    pthread_mutex_lock(&m->lock);
    uint32_t n = m->count;
    if (n < OFL_CHAN_MGR_MAX_ENDS) {
        m->slots[n] = s;
        /* In place of an older slot of the same end (its handler closed it and it is
         * served again): the newest serves. */
        m->index[index_place(m, s->end.ctl, side)] = n + 1;
        STORE(&m->count, n + 1, RELEASE);
    }
    pthread_mutex_unlock(&m->lock);
    if (n >= OFL_CHAN_MGR_MAX_ENDS) {
        ofl_chan_close(&s->end);
        free(s);
        return -ENOSPC;
    }
    return 0;
}

int ofl_chan_mgr_bulk_send(struct ofl_chan_mgr *m, void *region, uint32_t id, int side,
                           const void *buf, size_t len)
{
    const struct chan_region *r = region ? chan_region_ok(region) : NULL;
    if (!m || !r || id >= r->nchan || (len && !buf)) return -EINVAL;
    const struct chan_ctl *ctl = chan_ctl_at(r, id);
    pthread_mutex_lock(&m->lock);   /* the slots and index ofl_chan_mgr_serve publishes */
    uint32_t v = m->index[index_place(m, ctl, side)];
    struct mgr_slot *s = v ? m->slots[v - 1] : NULL;
    pthread_mutex_unlock(&m->lock);
    if (!s) return -ENOENT;
    uint32_t st = SEND_FREE;
    if (!__atomic_compare_exchange_n(&s->send_state, &st, SEND_FILLING, false,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return -EBUSY;
    if (!LOAD(&s->active, RELAXED)) {
        STORE(&s->send_state, SEND_FREE, RELEASE);
        return -EPIPE;
    }
    s->send_buf = buf;
    s->send_len = len;
    STORE(&s->send_state, SEND_READY, RELEASE);
    return 0;
}

/* The slot serving side `side` of channel `id` in `region`, or NULL. */
static struct mgr_slot *slot_of(struct ofl_chan_mgr *m, void *region, uint32_t id, int side)
{
    const struct chan_region *r = region ? chan_region_ok(region) : NULL;
    if (!m || !r || id >= r->nchan) return NULL;
    const struct chan_ctl *ctl = chan_ctl_at(r, id);
    pthread_mutex_lock(&m->lock);
    uint32_t v = m->index[index_place(m, ctl, side)];
    struct mgr_slot *s = v ? m->slots[v - 1] : NULL;
    pthread_mutex_unlock(&m->lock);
    return s;
}

int ofl_chan_mgr_post(struct ofl_chan_mgr *m, void *region, uint32_t id, int side,
                      const void *msg, size_t len)
{
    struct mgr_slot *s = slot_of(m, region, id, side);
    if (!s) return m && region ? -ENOENT : -EINVAL;
    if (!LOAD(&s->active, RELAXED)) return -EPIPE;
    /* a queued or running bulk send uses the line: the post waits for it */
    if (LOAD(&s->send_state, ACQUIRE) != SEND_FREE) return -EBUSY;
    /* so does the end's handler while it runs (see poll_msg) */
    uint32_t free_ = POST_FREE;
    if (!__atomic_compare_exchange_n(&s->poster, &free_, POST_RELAY, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        return -EBUSY;
    int rc = ofl_chan_post(&s->end, msg, len);
    STORE(&s->poster, POST_FREE, RELEASE);
    return rc;
}

int ofl_chan_mgr_peer_state(struct ofl_chan_mgr *m, void *region, uint32_t id, int side)
{
    struct mgr_slot *s = slot_of(m, region, id, side);
    return s ? ofl_chan_peer_state(&s->end) : -EINVAL;
}

int ofl_chan_mgr_peer_closed(struct ofl_chan_mgr *m, void *region, uint32_t id, int side)
{
    struct mgr_slot *s = slot_of(m, region, id, side);
    if (!s) return -EINVAL;
    uint32_t g = LOAD(&side_peer(&s->end)->gen, ACQUIRE);
    return g && !(g & 1u);
}

int ofl_chan_mgr_post_done(struct ofl_chan_mgr *m, void *region, uint32_t id, int side)
{
    struct mgr_slot *s = slot_of(m, region, id, side);
    return !s || !LOAD(&s->active, RELAXED) || ofl_chan_post_done(&s->end);
}

/* Add the counters of `e` (closed) to `sum`. */
static void stats_add(struct ofl_chan_stats *sum, const struct ofl_chan_end *e)
{
    struct ofl_chan_stats st;
    ofl_chan_get_stats(e, &st);
    sum->sent += st.sent;
    sum->posted += st.posted;
    sum->received += st.received;
    sum->withdrawn += st.withdrawn;
    sum->bulk_sent += st.bulk_sent;
    sum->bulk_received += st.bulk_received;
    sum->bulk_failed += st.bulk_failed;
    sum->chunks += st.chunks;
    sum->bytes_memcpy += st.bytes_memcpy;
    sum->bytes_vm += st.bytes_vm;
    sum->bytes_bounce += st.bytes_bounce;
    sum->bytes_mem += st.bytes_mem;
    sum->paths |= st.paths;
}

void ofl_chan_mgr_stop(struct ofl_chan_mgr *m)
{
    ofl_chan_mgr_stop_sum(m, NULL);
}

void ofl_chan_mgr_stop_sum(struct ofl_chan_mgr *m, struct ofl_chan_stats *sum)
{
    if (sum) *sum = (struct ofl_chan_stats){0};
    if (!m) return;
    STORE(&m->stop, 1u, RELEASE);
    for (unsigned i = 0; i < m->started; i++) pthread_join(m->workers[i].thread, NULL);
    for (uint32_t i = 0; i < m->count; i++) {
        struct mgr_slot *s = m->slots[i];
        if (s->op_active) {
            chan_bulk_fail(&s->end, &s->op, -ECANCELED);
            op_over(s, -ECANCELED);
        }
        if (LOAD(&s->send_state, ACQUIRE) == SEND_READY) send_drop(s, -ECANCELED);
        ofl_chan_close(&s->end);   /* (a post still pending: withdrawn, counted) */
        if (sum) stats_add(sum, &s->end);
        free(s);
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}
