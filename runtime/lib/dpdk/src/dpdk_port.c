/* Source and sink kind "dpdk": packets through DPDK's ethdev (offlow/dpdk_port.h). */
#include "offlow/dpdk_port.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#define MAX_PORTS 8
#define MAX_RXQ 16u                /* RX queues of one port a source may read */
#define BURST 32u
#define RING_DESC 1024u
#define POOL_MBUFS 16383u

/* The mbufs an RX queue's source delivered in its last batch: the program's packets
 * point into them (zero copy) until the source's next call frees them. A sink on the
 * same thread takes the one a packet lies in and sends it as it is (NULL here then). */
struct rxq {
    struct rte_mbuf *m[BURST];
    unsigned n, next;          /* lent; where a sink looks first (packets go in order) */
    pthread_t owner;           /* the thread that reads the queue (set under env.lock) */
    int owned;
};

struct port {
    char args[512];            /* what --port named (dpdk:ARGS without "dpdk:") */
    uint16_t id;
    struct rxq rxq[MAX_RXQ];
    unsigned nrx, ntx;         /* queues asked for by the sources and sinks opened */
    int state;                 /* 0: not started; 1: started; < 0: failed (errno) */
};

/* DPDK's EAL is one per process (rte_eal_init may be called once): so is this. */
static struct {
    pthread_mutex_t lock;
    int eal;                   /* 0: not yet; 1: up; < 0: failed */
    struct rte_mempool *pool;
    struct port ports[MAX_PORTS];
    unsigned nports;
    unsigned users;            /* sources and sinks open: the last to close ends DPDK */
    unsigned owners;           /* changes when an RX queue gets or loses its thread */
} env = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A PCI address (DDDD:BB:DD.F or BB:DD.F) rather than virtual-device arguments. */
static int is_pci(const char *s)
{
    unsigned n = 0;
    for (const char *c = s; *c; c++, n++)
        if (!isxdigit((unsigned char)*c) && *c != ':' && *c != '.') return 0;
    return n >= 7 && strchr(s, ':') && strchr(s, '.');
}

/* The ethdev name of `args`: the device before its first ',' (a vdev) or the address. */
static void dev_name(const char *args, char *out, size_t len)
{
    size_t n = strcspn(args, ",");
    if (n >= len) n = len - 1;
    memcpy(out, args, n);
    out[n] = 0;
}

static int eal_up(const char *args, char *errbuf)
{
    if (env.eal) return env.eal;
    char prefix[64], mem[] = "256";
    snprintf(prefix, sizeof prefix, "offlow-%ld", (long)getpid());
    char *argv[16];
    int argc = 0;
    argv[argc++] = "offlow";
    argv[argc++] = "--no-huge";
    argv[argc++] = "-m";
    argv[argc++] = mem;
    argv[argc++] = "--file-prefix";
    argv[argc++] = prefix;
    argv[argc++] = "--no-shconf";
    argv[argc++] = "--log-level=4";
    if (is_pci(args)) {
        argv[argc++] = "-a";
    } else {
        argv[argc++] = "--no-pci";
        argv[argc++] = "--vdev";
    }
    argv[argc++] = (char *)args;
    argv[argc] = NULL;
    /* EAL pins the calling thread to its main lcore: give it back its CPUs. */
    cpu_set_t cpus;
    int have = sched_getaffinity(0, sizeof cpus, &cpus) == 0;
    int rc = rte_eal_init(argc, argv);
    if (have) sched_setaffinity(0, sizeof cpus, &cpus);
    if (rc < 0) {
        snprintf(errbuf, 256, "DPDK's EAL did not start with %s: %s", args,
                 rte_strerror(rte_errno));
        return env.eal = -(rte_errno ? rte_errno : EINVAL);
    }
    env.pool = rte_pktmbuf_pool_create("offlow", POOL_MBUFS, 256, 0,
                                       RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (!env.pool) {
        snprintf(errbuf, 256, "no packet buffers: %s", rte_strerror(rte_errno));
        return env.eal = -ENOMEM;
    }
    return env.eal = 1;
}

static void env_end(void);

unsigned ofl_dpdk_mbufs_in_use(void)
{
    pthread_mutex_lock(&env.lock);
    unsigned n = env.pool ? rte_mempool_in_use_count(env.pool) : 0u;
    pthread_mutex_unlock(&env.lock);
    return n;
}

/* The port of `args` (probed on first use), under env.lock. */
static struct port *port_get(const char *args, char *errbuf)
{
    char name[RTE_ETH_NAME_MAX_LEN];
    dev_name(args, name, sizeof name);
    for (unsigned i = 0; i < env.nports; i++) {
        if (!strcmp(env.ports[i].args, args)) return &env.ports[i];
        char other[RTE_ETH_NAME_MAX_LEN];
        dev_name(env.ports[i].args, other, sizeof other);
        if (!strcmp(other, name)) {
            snprintf(errbuf, 256, "device %s is opened twice with other arguments", name);
            return NULL;
        }
    }
    if (strlen(args) >= sizeof env.ports[0].args || env.nports == MAX_PORTS) {
        snprintf(errbuf, 256, "too many ports or arguments too long");
        return NULL;
    }
    int first = !env.eal;
    int rc = eal_up(args, errbuf);
    if (rc < 0) {
        if (!first) snprintf(errbuf, 256, "DPDK's EAL failed earlier in this process");
        return NULL;
    }
    if (!first && rte_dev_probe(args) < 0) {
        snprintf(errbuf, 256, "DPDK cannot probe %s", args);
        return NULL;
    }
    uint16_t id;
    if (rte_eth_dev_get_port_by_name(name, &id) != 0) {
        snprintf(errbuf, 256, "DPDK has no port %s (a driver that failed to start, or not "
                 "an ethdev: see the EAL's messages above)", name);
        return NULL;
    }
    struct port *p = &env.ports[env.nports++];
    snprintf(p->args, sizeof p->args, "%s", args);
    p->id = id;
    return p;
}

/* Open the port of option "<name>.port" and reserve `nrx` RX or `ntx` TX queues (the
 * first of which is *first_tx). */
static struct port *port_open(const struct ofl_args *a, const char *name, unsigned nrx,
                              unsigned ntx, unsigned *first_tx, char *errbuf)
{
    const char *args = ofl_args_get(a, name, "port", NULL);
    if (!args || !*args) {
        snprintf(errbuf, 256, "kind=dpdk needs port=ARGS");
        return NULL;
    }
    pthread_mutex_lock(&env.lock);
    struct port *p = port_get(args, errbuf);
    if (p && p->state) {
        snprintf(errbuf, 256, "port %s is already running", args);
        p = NULL;
    }
    if (p) {
        struct rte_eth_dev_info info;
        int rc = rte_eth_dev_info_get(p->id, &info);
        unsigned rx = nrx > p->nrx ? nrx : p->nrx, tx = p->ntx + ntx;
        if (rc < 0) {
            snprintf(errbuf, 256, "port %s: no device information (%s)", args, strerror(-rc));
            p = NULL;
        } else if (rx > info.max_rx_queues || tx > info.max_tx_queues) {
            snprintf(errbuf, 256, "port %s has %u RX and %u TX queues; this process needs "
                     "%u and %u (one per core of the segment)", args, info.max_rx_queues,
                     info.max_tx_queues, rx, tx);
            p = NULL;
        } else {
            *first_tx = p->ntx;
            p->nrx = rx;
            p->ntx = tx;
        }
    }
    if (p) env.users++;
    else if (env.users == 0) env_end();  /* (the EAL's folder goes with it) */
    pthread_mutex_unlock(&env.lock);
    return p;
}

/* Remove the EAL's runtime folder of this process (its sockets and nothing else: the
 * folder is named by --file-prefix offlow-PID). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

/* A source or sink closed: the last one stops and closes the ports (net_pcap finishes
 * its tx_pcap file then) and ends the EAL, removing its runtime folder. */
static void port_release(void)
{
    pthread_mutex_lock(&env.lock);
    if (--env.users == 0) env_end();
    pthread_mutex_unlock(&env.lock);
}

/* Close the ports and end the EAL (no source or sink is open), under env.lock; a
 * later open fails. */
static void env_end(void)
{
    if (env.eal != 1) return;
    for (unsigned i = 0; i < env.nports; i++) {
        if (env.ports[i].state == 1) rte_eth_dev_stop(env.ports[i].id);
        rte_eth_dev_close(env.ports[i].id);
    }
    env.nports = 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", rte_eal_get_runtime_dir());
    rte_mempool_free(env.pool);
    env.pool = NULL;
    rte_eal_cleanup();
    remove_dir(dir);
    env.eal = -ESHUTDOWN;
}

static int port_setup(struct port *p)
{
    struct rte_eth_dev_info info;
    int rc = rte_eth_dev_info_get(p->id, &info);
    if (rc < 0) return rc;
    unsigned nrx = p->nrx ? p->nrx : 1, ntx = p->ntx ? p->ntx : 1;
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    if (nrx > 1) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = RTE_ETH_RSS_IP & info.flow_type_rss_offloads;
    }
    if ((rc = rte_eth_dev_configure(p->id, (uint16_t)nrx, (uint16_t)ntx, &conf)) < 0) return rc;
    uint16_t nb_rx = RING_DESC, nb_tx = RING_DESC;
    if ((rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->id, &nb_rx, &nb_tx)) < 0) return rc;
    int sock = rte_eth_dev_socket_id(p->id);
    for (unsigned q = 0; q < nrx; q++)
        if ((rc = rte_eth_rx_queue_setup(p->id, (uint16_t)q, nb_rx, (unsigned)sock, NULL,
                                         env.pool)) < 0)
            return rc;
    for (unsigned q = 0; q < ntx; q++)
        if ((rc = rte_eth_tx_queue_setup(p->id, (uint16_t)q, nb_tx, (unsigned)sock, NULL)) < 0)
            return rc;
    if ((rc = rte_eth_dev_start(p->id)) < 0) return rc;
    rte_eth_promiscuous_enable(p->id);  /* (some PMDs cannot: that is no fault) */
    return 0;
}

/* Configure and start the port on its first packet call (every open is done by
 * then); give this thread an lcore id (the mempool's per-core cache). */
static int port_start(struct port *p, int *thread_ok)
{
    int st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
    if (st != 1) {
        pthread_mutex_lock(&env.lock);
        if (p->state == 0) {
            int rc = port_setup(p);
            if (rc < 0) {
                fprintf(stderr, "offlow: DPDK port %s did not start: %s\n", p->args,
                        strerror(-rc));
                __atomic_store_n(&p->state, rc, __ATOMIC_RELEASE);
            } else {
                __atomic_store_n(&p->state, 1, __ATOMIC_RELEASE);
            }
        }
        st = p->state;
        pthread_mutex_unlock(&env.lock);
        if (st < 0) return st;
    }
    if (!*thread_ok) {
        if (rte_lcore_id() == LCORE_ID_ANY) rte_thread_register();  /* none left: no cache */
        *thread_ok = 1;
    }
    return 0;
}

/* The port is started and this thread has its lcore id (per packet: inline). */
static inline int port_ready(struct port *p, int *thread_ok)
{
    if (__builtin_expect(*thread_ok && __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == 1, 1))
        return 0;
    return port_start(p, thread_ok);
}

/* ---- source ------------------------------------------------------------------------ */

struct dpdk_src {
    struct ofl_src s;
    struct port *port;
    uint16_t queue;
    int thread_ok;
    unsigned idle;             /* empty bursts since the port's counters were read */
};

/* Give back the mbufs of the last batch that no sink took. */
static void rxq_free_lent(struct rxq *r)
{
    struct rte_mbuf *left[BURST];
    unsigned k = 0;
    for (unsigned i = 0; i < r->n; i++)
        if (r->m[i]) left[k++] = r->m[i];
    if (k) rte_pktmbuf_free_bulk(left, k);
    r->n = r->next = 0;
}

/* This thread reads RX queue `r`: sinks on it may take its mbufs. */
static void rxq_own(struct rxq *r, int own)
{
    pthread_mutex_lock(&env.lock);
    r->owner = pthread_self();
    r->owned = own;
    __atomic_add_fetch(&env.owners, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&env.lock);
}

static int src_next(struct ofl_src *base, struct ofl_pkt *pkts, uint8_t *bufs, uint32_t n)
{
    struct dpdk_src *d = (struct dpdk_src *)base;
    struct rxq *r = &d->port->rxq[d->queue];
    int first = !d->thread_ok;
    int rc = port_ready(d->port, &d->thread_ok);
    if (rc < 0) {
        snprintf(base->error, sizeof base->error, "DPDK port %.200s did not start: %s",
                 d->port->args, strerror(-rc));
        return rc;
    }
    if (first) rxq_own(r, 1);
    rxq_free_lent(r);  /* the program is done with the last batch */
    uint16_t got = rte_eth_rx_burst(d->port->id, d->queue, r->m,
                                    (uint16_t)(n < BURST ? n : BURST));
    if (!got) {
        /* Now and then when idle, queue 0's core reads what the port dropped. */
        struct rte_eth_stats st;
        if (d->queue == 0 && ++d->idle % 1024 == 1 && rte_eth_stats_get(d->port->id, &st) == 0)
            base->missed = st.imissed + st.rx_nombuf;  /* (the port's, all queues) */
        return 0;
    }
    r->n = got;
    uint64_t now = base->now_ns ? base->now_ns : ofl_src_clock_ns();  /* (one read a batch) */
    uint32_t k = 0;
    for (uint16_t i = 0; i < got; i++) {
        struct rte_mbuf *m = r->m[i];
        uint32_t len = rte_pktmbuf_pkt_len(m);
        if (len > base->o.mtu) {
            base->dropped++;
            continue;
        }
        uint8_t *data = rte_pktmbuf_mtod(m, uint8_t *);
        uint32_t cap = m->data_len + rte_pktmbuf_tailroom(m);
        if (m->nb_segs != 1) {  /* a chained mbuf: copied into one of the core's buffers */
            data = bufs + (size_t)k * base->o.mtu;
            rte_pktmbuf_read(m, 0, len, data);
            cap = base->o.mtu;
        }
        pkts[k++] = (struct ofl_pkt){ data, len, cap < base->o.mtu ? cap : base->o.mtu, now, 0 };
    }
    return (int)k;
}

static void src_close(struct ofl_src *base)
{
    struct dpdk_src *d = (struct dpdk_src *)base;
    if (d->port) {
        rxq_free_lent(&d->port->rxq[d->queue]);
        rxq_own(&d->port->rxq[d->queue], 0);
    }
    free(base);
    port_release();
}

static const struct ofl_src_ops src_ops = { "dpdk", src_next, src_close };

int ofl_dpdk_src_open(struct ofl_src **s, const struct ofl_args *a, const char *name,
                      const struct ofl_src_opts *o, char *errbuf)
{
    struct dpdk_src *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    int rc = ofl_src_init(&d->s, &src_ops, o, ofl_args_get(a, name, "port", "dpdk"), errbuf);
    unsigned first_tx;
    if (rc == 0 && d->s.o.nparts > MAX_RXQ) {
        snprintf(errbuf, 256, "a dpdk source reads at most %u RX queues; its segment has %u "
                 "cores", MAX_RXQ, d->s.o.nparts);
        rc = -EINVAL;
    }
    if (rc == 0 && !(d->port = port_open(a, name, d->s.o.nparts, 0, &first_tx, errbuf)))
        rc = -EINVAL;
    if (rc < 0) {
        free(d);
        return rc;
    }
    d->queue = (uint16_t)d->s.o.part;
    *s = &d->s;
    return 0;
}

/* ---- sink -------------------------------------------------------------------------- */

struct txq {
    struct rte_mbuf *m[BURST];
    unsigned n;
    struct rte_mbuf *spare[BURST];  /* buffers taken from the pool in bulk, not yet used */
    unsigned nspare;
    int thread_ok;
    uint64_t dropped;
    struct rxq *lent[MAX_PORTS];    /* RX queues this core's thread reads: their mbufs */
    unsigned nlent;
    unsigned owners;                /* env.owners when `lent` was found (+1; 0: never) */
} __attribute__((aligned(64)));

struct dpdk_sink {
    struct ofl_port_sink k;
    struct port *port;
    uint16_t first_queue;
    unsigned ncores;
    struct txq *q;
};

static void sink_send(struct dpdk_sink *d, unsigned core)
{
    struct txq *q = &d->q[core];
    if (!q->n) return;
    uint16_t sent = rte_eth_tx_burst(d->port->id, (uint16_t)(d->first_queue + core), q->m,
                                     (uint16_t)q->n);
    if (sent < q->n) {  /* the TX ring is full: drop the rest, counted */
        rte_pktmbuf_free_bulk(q->m + sent, q->n - sent);
        q->dropped += q->n - sent;
    }
    q->n = 0;
}

/* The RX queues (of any port of the process) whose source runs on this thread, found
 * again whenever a queue got or lost its thread. */
static void txq_find_lent(struct txq *q)
{
    unsigned now = __atomic_load_n(&env.owners, __ATOMIC_ACQUIRE) + 1;
    if (q->owners == now) return;
    pthread_mutex_lock(&env.lock);
    q->nlent = 0;
    pthread_t self = pthread_self();
    for (unsigned i = 0; i < env.nports; i++)
        for (unsigned j = 0; j < MAX_RXQ && q->nlent < MAX_PORTS; j++) {
            struct rxq *r = &env.ports[i].rxq[j];
            if (r->owned && pthread_equal(r->owner, self)) q->lent[q->nlent++] = r;
        }
    q->owners = env.owners + 1;
    pthread_mutex_unlock(&env.lock);
}

/* Whether mbuf `m` (or NULL) holds the `len` bytes at address `a`. */
static inline int holds(const struct rte_mbuf *m, uintptr_t a, uint32_t len)
{
    uintptr_t b = (uintptr_t)(m ? m->buf_addr : NULL);
    return m && a >= b && a + len <= b + m->buf_len;
}

/* take_lent's search of every lent queue (not the usual case). */
static struct rte_mbuf *take_lent_any(struct txq *q, uintptr_t a, uint32_t len)
{
    for (unsigned l = 0; l < q->nlent; l++) {
        struct rxq *r = q->lent[l];
        for (unsigned j = 0, i = r->next; j < r->n; j++, i = i + 1 < r->n ? i + 1 : 0) {
            struct rte_mbuf *m = r->m[i];
            if (holds(m, a, len)) {
                r->m[i] = NULL;
                r->next = i + 1;
                return m;
            }
        }
    }
    return NULL;
}

/* The mbuf a source of this thread lent that holds the `len` bytes at `data`, taken
 * from its queue; NULL if none does (the packet came from a ring, a body's buffer). */
static inline __attribute__((always_inline)) struct rte_mbuf *
take_lent(struct txq *q, const uint8_t *data, uint32_t len)
{
    uintptr_t a = (uintptr_t)data;
    if (q->nlent) {  /* the usual: the next mbuf of the first queue (packets go in order) */
        struct rxq *r = q->lent[0];
        struct rte_mbuf *m = r->next < r->n ? r->m[r->next] : NULL;
        if (holds(m, a, len)) {
            r->m[r->next++] = NULL;
            return m;
        }
    }
    return take_lent_any(q, a, len);
}

/* Queue the packet in the mbuf it lies in (zero copy), else copied into a new one (the
 * port started and `q`'s lent queues found); the caller sends a full queue. Inlined in
 * both callers: a call a packet cost a third of its sink's instructions. */
static inline __attribute__((always_inline)) void sink_put(struct txq *q,
                                                           const struct ofl_pkt *p)
{
    struct rte_mbuf *m = take_lent(q, p->data, p->len);
    if (m) {  /* the body may have moved the frame's start or changed its length */
        m->data_off = (uint16_t)(p->data - (uint8_t *)m->buf_addr);
    } else {
        if (!q->nspare && rte_pktmbuf_alloc_bulk(env.pool, q->spare, BURST) == 0)
            q->nspare = BURST;
        if (!q->nspare || p->len > rte_pktmbuf_tailroom(q->spare[q->nspare - 1])) {
            q->dropped++;  /* no buffer, or longer than one holds */
            return;
        }
        m = q->spare[--q->nspare];
        rte_memcpy(rte_pktmbuf_mtod(m, void *), p->data, p->len);
    }
    m->data_len = (uint16_t)p->len;
    m->pkt_len = p->len;
    q->m[q->n++] = m;
}

static void sink_write(struct ofl_port_sink *base, unsigned core, const struct ofl_pkt *p)
{
    struct dpdk_sink *d = (struct dpdk_sink *)base;
    struct txq *q = &d->q[core];
    if (port_ready(d->port, &q->thread_ok) < 0) {
        q->dropped++;
        return;
    }
    txq_find_lent(q);
    sink_put(q, p);
    if (q->n == BURST) sink_send(d, core);
}

/* A burst: the port's start and the lent queues checked once for all. */
static void sink_write_burst(struct ofl_port_sink *base, unsigned core,
                             struct ofl_pkt *const *p, uint32_t n)
{
    struct dpdk_sink *d = (struct dpdk_sink *)base;
    struct txq *q = &d->q[core];
    if (port_ready(d->port, &q->thread_ok) < 0) {
        q->dropped += n;
        return;
    }
    txq_find_lent(q);
    for (uint32_t i = 0; i < n; i++) {
        sink_put(q, p[i]);
        if (q->n == BURST) sink_send(d, core);
    }
}

static void sink_flush(struct ofl_port_sink *base, unsigned core)
{
    sink_send((struct dpdk_sink *)base, core);
}

static uint64_t sink_dropped(const struct ofl_port_sink *base)
{
    const struct dpdk_sink *d = (const struct dpdk_sink *)base;
    uint64_t n = 0;
    for (unsigned c = 0; c < d->ncores; c++) n += d->q[c].dropped;
    return n;
}

static void sink_close(struct ofl_port_sink *base)
{
    struct dpdk_sink *d = (struct dpdk_sink *)base;
    for (unsigned c = 0; c < d->ncores; c++) {
        sink_send(d, c);
        if (d->q[c].nspare) rte_pktmbuf_free_bulk(d->q[c].spare, d->q[c].nspare);
    }
    free(d->q);
    free(d);
    port_release();
}

static const struct ofl_port_sink_ops sink_ops = { sink_write, sink_flush, sink_dropped,
                                                   sink_close, sink_write_burst };

int ofl_dpdk_sink_open(struct ofl_port_sink **k, const struct ofl_args *a, const char *name,
                       unsigned ncores, char *errbuf)
{
    struct dpdk_sink *d = calloc(1, sizeof *d);
    if (!d) return -ENOMEM;
    d->ncores = ncores ? ncores : 1;
    d->q = aligned_alloc(64, sizeof *d->q * d->ncores);
    if (!d->q) {
        free(d);
        return -ENOMEM;
    }
    memset(d->q, 0, sizeof *d->q * d->ncores);
    d->k.ops = &sink_ops;
    unsigned first_tx;
    if (!(d->port = port_open(a, name, 0, d->ncores, &first_tx, errbuf))) {
        free(d->q);
        free(d);
        return -EINVAL;
    }
    d->first_queue = (uint16_t)first_tx;
    *k = &d->k;
    return 0;
}
