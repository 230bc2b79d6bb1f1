/* An authenticated UCX connection (remote_link.h). */
#include "offlow/remote_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucp/api/ucp.h>

#include "offlow/remote_auth.h"

enum { KIND_CHALLENGE = 1, KIND_PROOF = 2, KIND_WELCOME = 3, KIND_BEAT = 4 };
#define BEATS 8   /* heartbeats sent per silence limit */
#define PENDING 8  /* connections still proving the secret, at most */

/* A connection that has not proved the secret yet (server side). */
struct pending {
    ucp_ep_h ep;
    uint8_t nonce[OFL_AUTH_NONCE];
    bool challenged;   /* our nonce was sent */
    uint64_t since_ns; /* when it connected: it must prove the secret within the limit */
    bool proof;        /* its proof arrived: check it in progress */
    uint8_t mac[OFL_AUTH_MAC], their_nonce[OFL_AUTH_NONCE];
};

struct sending;
struct inbox;

struct ofl_link {
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;   /* server */
    ucp_ep_h peer;             /* the authenticated peer (server), the server (client) */
    bool server;
    enum ofl_link_state state;
    uint8_t *secret;
    size_t secret_len;
    ofl_link_handler fn;
    void *arg;
    struct pending pend[PENDING];
    uint8_t nonce[OFL_AUTH_NONCE];     /* client: the nonce the server must prove */
    bool got_challenge, proof_sent;    /* client */
    uint8_t in_nonce[OFL_AUTH_NONCE];
    uint64_t refused, unauth_drops;
    uint64_t beats_in;                 /* heartbeats from the peer */
    uint64_t inflight, lost_sends;     /* sends UCX has not finished, and failed ones */
    uint64_t user_sends;               /* user messages given to UCX (the test hook's count) */
    uint64_t fail_send_at;             /* tests: the user send, counted from 1, that fails
                                          as if UCX had (OFFLOW_REMOTE_TEST_SEND_FAIL) */
    struct sending *sending;           /* those in flight (freed at close if UCX did not) */
    struct inbox *in_head, *in_tail;   /* messages held in order behind a bulk receive */
    uint64_t bulk_in;                  /* bulk (rendezvous) messages received */
    uint16_t port;
    uint64_t silence_ns;               /* the peer is dead after this long unheard */
    uint64_t heard_ns, sent_ns;        /* last message from / to the peer (UP) */
    char err[256];
};

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void fail(struct ofl_link *l, const char *fmt, ...)
{
    if (l->state == OFL_LINK_FAILED) return;  /* the first reason stays */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->err, sizeof l->err, fmt, ap);
    va_end(ap);
    l->state = OFL_LINK_FAILED;
}

static void set_err(char *err, size_t errlen, const char *what, ucs_status_t st)
{
    if (err && errlen) snprintf(err, errlen, "%s: %s", what, ucs_status_string(st));
}

static int sockaddr_of(const char *addr, uint16_t port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    return inet_pton(AF_INET, addr, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

/* Wait for request `r` (a pointer from a _nbx call): until it completes, or at most
 * `ns` nanoseconds. Returns true when it completed (and was freed). */
static bool wait_req(struct ofl_link *l, ucs_status_ptr_t r, uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
        if (now_ns() > end) return false;
        ucp_worker_progress(l->worker);
    }
    ucp_request_free(r);
    return true;
}

/* Close `ep`: `flush`: what was sent arrives first (the end of a run; a second at most,
 * a gone peer takes nothing), then at once (a refused or failed peer: force). */
static void close_ep(struct ofl_link *l, ucp_ep_h ep, bool flush)
{
    ucp_request_param_t none = {.op_attr_mask = 0};
    ucs_status_ptr_t f = flush ? ucp_ep_flush_nbx(ep, &none) : NULL;
    bool flushed = !UCS_PTR_IS_PTR(f) || wait_req(l, f, 1000000000u);
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
    if (UCS_PTR_IS_PTR(r)) wait_req(l, r, UINT64_MAX / 2);   /* a forced close ends */
    if (!flushed) wait_req(l, f, UINT64_MAX / 2);   /* the forced close ended the flush */
}

static struct pending *pending_of(struct ofl_link *l, ucp_ep_h ep)
{
    for (int i = 0; i < PENDING; i++)
        if (l->pend[i].ep && l->pend[i].ep == ep) return &l->pend[i];
    return NULL;
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct ofl_link *l = arg;
    if (ep == l->peer && !l->server && l->state == OFL_LINK_WAITING) {
        fail(l, "the device refused the connection (%s): %s", ucs_status_string(st),
             l->proof_sent ? "a wrong shared secret?" : "nothing listens there, or it is busy");
        return;
    }
    if (ep == l->peer) {
        fail(l, "the connection to the peer was lost (%s)", ucs_status_string(st));
        return;
    }
    struct pending *p = pending_of(l, ep);
    if (p) p->ep = NULL;   /* a connection that never proved itself: forget it */
}

/* A send's copy of its message, freed when UCX is done with it. */
struct sending {
    struct sending *prev, *next;   /* the link's sends in flight */
    struct ofl_link *l;
    void *owned;                   /* a bulk send's data, freed with it */
    uint8_t bytes[];
};

/* A message UCX did not deliver: the peer's stream has a hole (a ring's entries or a
 * channel's message missing), so the link fails, the message counted as lost. */
static void send_lost(struct ofl_link *l, ucs_status_t st)
{
    l->lost_sends++;
    fail(l, "a message to the peer was lost (%s)", ucs_status_string(st));
}

static void sent(void *req, ucs_status_t st, void *user)
{
    (void)req;
    struct sending *s = user;
    struct ofl_link *l = s->l;
    if (st != UCS_OK) send_lost(l, st);
    l->inflight--;
    if (s->prev) s->prev->next = s->next;
    else l->sending = s->next;
    if (s->next) s->next->prev = s->prev;
    free(s->owned);
    free(s);
}

/* Send without waiting: UCX takes a copy, so neither side's progress waits on the
 * other (each side is one thread, and a test steps both in one). `owned` (malloc'd,
 * `len` bytes, freed when UCX is done with it): a bulk message, sent from it with
 * UCX's rendezvous protocol (zero-copy where the transport has it) instead. */
static int send_ep(struct ofl_link *l, ucp_ep_h ep, uint32_t kind, const void *hdr,
                   size_t hlen, const void *data, size_t len, void *owned)
{
    struct sending *s = malloc(sizeof *s + hlen + (owned ? 0 : len));
    if (!s) {
        free(owned);
        return -ENOMEM;
    }
    s->l = l;
    s->owned = owned;
    memcpy(s->bytes, hdr, hlen);
    if (len && !owned) memcpy(s->bytes + hlen, data, len);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK |
                        UCP_OP_ATTR_FIELD_USER_DATA,
        .flags = UCP_AM_SEND_FLAG_REPLY |
                 (owned ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER),
        .cb = {.send = sent},
        .user_data = s,
    };
    bool fake = kind >= OFL_LINK_KIND_USER && ++l->user_sends == l->fail_send_at;
    ucs_status_ptr_t r = fake ? UCS_STATUS_PTR(UCS_ERR_IO_ERROR)   /* tests: as if UCX had */
                              : ucp_am_send_nbx(ep, kind, s->bytes, hlen,
                                                owned ? owned : s->bytes + hlen, len, &p);
    if (fake) {   /* its completion fails, as a send UCX took and could not deliver */
        free(s->owned);
        free(s);
        send_lost(l, UCS_ERR_IO_ERROR);
        return 0;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(s->owned);
        free(s);
        if (ep == l->peer)
            fail(l, "cannot send to the peer (%s)", ucs_status_string(UCS_PTR_STATUS(r)));
        return -EPIPE;
    }
    if (!r) {
        free(s->owned);
        free(s);
        return 0;
    }
    l->inflight++;
    s->prev = NULL;
    s->next = l->sending;
    if (l->sending) l->sending->prev = s;
    l->sending = s;
    ucp_request_free(r);   /* `sent` still runs when it completes */
    return 0;
}

/* A message from the peer held back, in order, behind a bulk message still arriving
 * (ucp_am_recv_data_nbx): the handler sees every message in the order sent. */
struct inbox {
    struct inbox *next;
    struct ofl_link *l;
    uint32_t kind;
    bool ready;          /* its data is all here */
    bool failed;
    void *desc;          /* a bulk message's UCX descriptor, its receive not started yet */
    size_t hlen, len;
    uint8_t *data;       /* len bytes */
    uint8_t hdr[];       /* hlen bytes */
};

static void inbox_data(void *req, ucs_status_t st, size_t len, void *user)
{
    (void)len;
    ucp_request_free(req);
    struct inbox *m = user;
    m->ready = true;
    m->failed = st != UCS_OK;
}

/* Start the receives of bulk messages that arrived (outside UCX's callback, as UCX
 * asks), then hand the messages at the head of the inbox whose data is here to the
 * handler. */
static void inbox_deliver(struct ofl_link *l)
{
    for (struct inbox *m = l->in_head; m; m = m->next) {
        if (!m->desc) continue;
        ucp_request_param_t p = {
            .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
            .cb = {.recv_am = inbox_data},
            .user_data = m,
        };
        void *desc = m->desc;
        m->desc = NULL;
        ucs_status_ptr_t r = ucp_am_recv_data_nbx(l->worker, desc, m->data, m->len, &p);
        if (UCS_PTR_IS_ERR(r)) {
            m->ready = m->failed = true;
        } else if (!r) {
            m->ready = true;
        }   /* (else `inbox_data` frees the request: one freed before it completes is
             * never completed, UCX 1.13) */
    }
    while (l->in_head && l->in_head->ready && l->state == OFL_LINK_UP) {
        struct inbox *m = l->in_head;
        l->in_head = m->next;
        if (!l->in_head) l->in_tail = NULL;
        if (m->failed) fail(l, "a bulk message from the peer was lost");
        else l->fn(l->arg, m->kind, m->hdr, m->hlen, m->data, m->len);
        free(m->data);
        free(m);
    }
}

static void inbox_free(struct ofl_link *l)
{
    while (l->in_head) {
        struct inbox *m = l->in_head;
        l->in_head = m->next;
        free(m->data);   /* (after the worker is gone: UCX writes none of it now) */
        free(m);
    }
    l->in_tail = NULL;
}

/* Queue a user message (`rndv`: `data` is UCX's descriptor of a bulk message, to be
 * fetched into a buffer of our own). Returns false when it could not be held (the link
 * failed). */
static bool inbox_add(struct ofl_link *l, uint32_t kind, const void *hdr, size_t hlen,
                      void *data, size_t len, bool rndv)
{
    struct inbox *m = calloc(1, sizeof *m + hlen);
    if (!m || (len && !(m->data = malloc(len)))) {
        free(m);
        fail(l, "out of memory for a message of %zu bytes from the peer", len);
        return false;
    }
    m->l = l;
    m->kind = kind;
    m->hlen = hlen;
    m->len = len;
    memcpy(m->hdr, hdr, hlen);
    m->ready = !rndv;
    if (rndv) {   /* (its receive starts in inbox_deliver) */
        m->desc = data;
        l->bulk_in++;
    } else if (len) {
        memcpy(m->data, data, len);
    }
    if (l->in_tail) l->in_tail->next = m;
    else l->in_head = m;
    l->in_tail = m;
    return true;
}

static void up(struct ofl_link *l)
{
    l->state = OFL_LINK_UP;
    l->heard_ns = l->sent_ns = now_ns();
}

static ucs_status_t on_msg(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    struct ofl_link *l = arg;
    ucp_ep_h from = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep
                                                                         : NULL;
    uint32_t kind = 0;   /* UCX's buffers need not be aligned */
    if (hlen >= 4) memcpy(&kind, hdr, 4);
    bool rndv = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    if (rndv && (l->state != OFL_LINK_UP || !from || from != l->peer)) {
        l->unauth_drops++;   /* (the handshake's messages are eager) */
        return UCS_OK;
    }
    if (l->server) {
        struct pending *p = from ? pending_of(l, from) : NULL;
        if (p && kind == KIND_PROOF && len == OFL_AUTH_MAC + OFL_AUTH_NONCE && p->challenged) {
            memcpy(p->mac, data, OFL_AUTH_MAC);
            memcpy(p->their_nonce, (const uint8_t *)data + OFL_AUTH_MAC, OFL_AUTH_NONCE);
            p->proof = true;
            return UCS_OK;
        }
        if (!from || from != l->peer || l->state != OFL_LINK_UP) {
            l->unauth_drops++;
            return UCS_OK;
        }
    } else {
        if (kind == KIND_CHALLENGE && len == OFL_AUTH_NONCE && !l->got_challenge) {
            memcpy(l->in_nonce, data, OFL_AUTH_NONCE);
            l->got_challenge = true;
            return UCS_OK;
        }
        if (kind == KIND_WELCOME && len == OFL_AUTH_MAC && l->proof_sent &&
            l->state == OFL_LINK_WAITING) {
            /* checked here, not after this progress call: a message the device sends
             * right after its welcome may come in the same call, and is the peer's */
            if (ofl_auth_check(l->secret, l->secret_len, OFL_AUTH_SERVER, l->nonce, data))
                fail(l, "the device did not prove the shared secret");
            else
                up(l);
            return UCS_OK;
        }
        if (l->state != OFL_LINK_UP) {
            l->unauth_drops++;
            return UCS_OK;
        }
    }
    l->heard_ns = now_ns();   /* from the authenticated peer */
    if (kind == KIND_BEAT) {
        l->beats_in++;
        return UCS_OK;
    }
    if (kind < OFL_LINK_KIND_USER || (rndv && len > OFL_LINK_BULK_MAX)) {
        l->unauth_drops++;   /* a handshake message out of turn, or too large */
        return UCS_OK;
    }
    if (rndv || l->in_head) {   /* a bulk message, or one behind it */
        bool held = inbox_add(l, kind, (const uint8_t *)hdr + 4, hlen - 4, data, len, rndv);
        return held && rndv ? UCS_INPROGRESS : UCS_OK;   /* (UCX keeps a bulk's data) */
    }
    l->fn(l->arg, kind, (const uint8_t *)hdr + 4, hlen - 4, data, len);
    return UCS_OK;
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
    struct ofl_link *l = arg;
    struct pending *slot = NULL;
    for (int i = 0; i < PENDING && !slot; i++)
        if (!l->pend[i].ep) slot = &l->pend[i];
    if (!slot || l->state == OFL_LINK_FAILED) {
        ucp_listener_reject(l->listener, req);
        return;
    }
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .conn_request = req,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error, .arg = l},
    };
    memset(slot, 0, sizeof *slot);
    slot->since_ns = now_ns();
    if (ucp_ep_create(l->worker, &ep, &slot->ep) != UCS_OK) slot->ep = NULL;
}

static int setup(struct ofl_link *l, const uint8_t *secret, size_t secret_len,
                 ofl_link_handler fn, void *arg, char *err, size_t errlen)
{
    if (!secret || secret_len < OFL_AUTH_SECRET_MIN || secret_len > OFL_AUTH_SECRET_MAX) {
        snprintf(err, errlen, "the shared secret must be %d..%d bytes", OFL_AUTH_SECRET_MIN,
                 OFL_AUTH_SECRET_MAX);
        return -EINVAL;
    }
    l->secret = malloc(secret_len);
    if (!l->secret) return -ENOMEM;
    memcpy(l->secret, secret, secret_len);
    l->secret_len = secret_len;
    l->fn = fn;
    l->arg = arg;
    l->silence_ns = OFL_LINK_SILENCE_MS * 1000000ull;
    const char *hook = getenv("OFFLOW_REMOTE_TEST_SEND_FAIL");
    if (hook && *hook) l->fail_send_at = strtoull(hook, NULL, 10);
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucp_config_t *config;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        set_err(err, errlen, "cannot read UCX's configuration", st);
        return -EIO;
    }
    st = ucp_init(&params, config, &l->ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        l->ctx = NULL;
        set_err(err, errlen, "cannot start UCX", st);
        return -EIO;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    st = ucp_worker_create(l->ctx, &wp, &l->worker);
    if (st != UCS_OK) {
        l->worker = NULL;
        set_err(err, errlen, "cannot make a UCX worker", st);
        return -EIO;
    }
    for (uint32_t k = 1; k < OFL_LINK_KIND_MAX; k++) {
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG,
            .id = k, .cb = on_msg, .arg = l};
        if (ucp_worker_set_am_recv_handler(l->worker, &hp) != UCS_OK) return -EIO;
    }
    return 0;
}

int ofl_link_listen(struct ofl_link **out, const char *addr, uint16_t port,
                    const uint8_t *secret, size_t secret_len, ofl_link_handler fn, void *arg,
                    char *err, size_t errlen)
{
    *out = NULL;
    struct sockaddr_in sa;
    if (sockaddr_of(addr, port, &sa)) {
        snprintf(err, errlen, "`%s` is not an IPv4 address", addr);
        return -EINVAL;
    }
    struct ofl_link *l = calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    l->server = true;
    int rc = setup(l, secret, secret_len, fn, arg, err, errlen);
    if (rc) {
        ofl_link_close(l);
        return rc;
    }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (const struct sockaddr *)&sa, .addrlen = sizeof sa},
        .conn_handler = {.cb = on_conn, .arg = l},
    };
    ucs_status_t st = ucp_listener_create(l->worker, &lp, &l->listener);
    if (st != UCS_OK) {
        l->listener = NULL;
        snprintf(err, errlen, "cannot listen on %s:%u: %s", addr, port, ucs_status_string(st));
        ofl_link_close(l);
        return -EADDRINUSE;
    }
    ucp_listener_attr_t at = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    if (ucp_listener_query(l->listener, &at) == UCS_OK)
        l->port = ntohs(((const struct sockaddr_in *)&at.sockaddr)->sin_port);
    *out = l;
    return 0;
}

int ofl_link_connect(struct ofl_link **out, const char *addr, uint16_t port,
                     const uint8_t *secret, size_t secret_len, ofl_link_handler fn,
                     void *arg, char *err, size_t errlen)
{
    *out = NULL;
    struct sockaddr_in sa;
    if (sockaddr_of(addr, port, &sa)) {
        snprintf(err, errlen, "`%s` is not an IPv4 address", addr);
        return -EINVAL;
    }
    struct ofl_link *l = calloc(1, sizeof *l);
    if (!l) return -ENOMEM;
    int rc = setup(l, secret, secret_len, fn, arg, err, errlen);
    if (!rc) rc = ofl_auth_nonce(l->nonce);
    if (rc) {
        ofl_link_close(l);
        return rc;
    }
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = (const struct sockaddr *)&sa, .addrlen = sizeof sa},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_error, .arg = l},
    };
    ucs_status_t st = ucp_ep_create(l->worker, &ep, &l->peer);
    if (st != UCS_OK) {
        l->peer = NULL;
        snprintf(err, errlen, "cannot connect to %s:%u: %s", addr, port, ucs_status_string(st));
        ofl_link_close(l);
        return -ECONNREFUSED;
    }
    *out = l;
    return 0;
}

uint16_t ofl_link_port(const struct ofl_link *l) { return l->port; }

/* Beat when we have been quiet; fail when the peer has been. */
static void watch_peer(struct ofl_link *l)
{
    uint64_t t = now_ns();
    if (t - l->heard_ns > l->silence_ns) {
        fail(l, "the peer stopped answering (nothing for %llu ms)",
             (unsigned long long)((t - l->heard_ns) / 1000000u));
        return;
    }
    if (t - l->sent_ns >= l->silence_ns / BEATS) {
        uint32_t kind = KIND_BEAT;
        if (!send_ep(l, l->peer, KIND_BEAT, &kind, 4, NULL, 0, NULL)) l->sent_ns = t;
    }
}

/* Server: challenge new connections, check proofs that arrived. */
static void serve_handshakes(struct ofl_link *l)
{
    for (int i = 0; i < PENDING; i++) {
        struct pending *p = &l->pend[i];
        if (!p->ep) continue;
        if (!p->challenged) {
            uint32_t kind = KIND_CHALLENGE;
            if (ofl_auth_nonce(p->nonce) ||
                send_ep(l, p->ep, KIND_CHALLENGE, &kind, 4, p->nonce, OFL_AUTH_NONCE, NULL)) {
                close_ep(l, p->ep, false);
                p->ep = NULL;
                continue;
            }
            p->challenged = true;
        }
        if (!p->proof) {
            /* a connection that does not prove itself in time (silent, or a slow
             * loris holding one of the slots) goes */
            if (now_ns() - p->since_ns > l->silence_ns) {
                l->refused++;
                fprintf(stderr, "offlow serve-device: refused a peer: no proof of the "
                        "shared secret within %llu ms\n",
                        (unsigned long long)(l->silence_ns / 1000000u));
                close_ep(l, p->ep, false);
                p->ep = NULL;
            }
            continue;
        }
        p->proof = false;
        uint8_t mac[OFL_AUTH_MAC];
        uint32_t kind = KIND_WELCOME;
        if (l->state != OFL_LINK_WAITING ||
            ofl_auth_check(l->secret, l->secret_len, OFL_AUTH_CLIENT, p->nonce, p->mac)) {
            l->refused++;
            fprintf(stderr, "offlow serve-device: refused a peer: %s\n",
                    l->state == OFL_LINK_WAITING ? "wrong proof of the shared secret"
                                                 : "a run is connected already");
            close_ep(l, p->ep, false);
            p->ep = NULL;
            continue;
        }
        if (ofl_auth_prove(l->secret, l->secret_len, OFL_AUTH_SERVER, p->their_nonce, mac) ||
            send_ep(l, p->ep, KIND_WELCOME, &kind, 4, mac, OFL_AUTH_MAC, NULL)) {
            close_ep(l, p->ep, false);
            p->ep = NULL;
            continue;
        }
        l->peer = p->ep;
        p->ep = NULL;
        up(l);
    }
}

/* Client: answer the challenge (the server's proof is checked as it arrives: on_msg). */
static void client_handshake(struct ofl_link *l)
{
    if (!l->got_challenge || l->state != OFL_LINK_WAITING || l->proof_sent) return;
    uint8_t msg[OFL_AUTH_MAC + OFL_AUTH_NONCE];
    uint32_t kind = KIND_PROOF;
    if (ofl_auth_prove(l->secret, l->secret_len, OFL_AUTH_CLIENT, l->in_nonce, msg)) {
        fail(l, "cannot compute the handshake proof");
        return;
    }
    memcpy(msg + OFL_AUTH_MAC, l->nonce, OFL_AUTH_NONCE);
    l->proof_sent = true;
    send_ep(l, l->peer, KIND_PROOF, &kind, 4, msg, sizeof msg, NULL);
}

enum ofl_link_state ofl_link_progress(struct ofl_link *l)
{
    while (ucp_worker_progress(l->worker)) {
    }
    if (l->server) serve_handshakes(l);
    else client_handshake(l);
    if (l->state == OFL_LINK_UP) watch_peer(l);
    inbox_deliver(l);
    return l->state;
}

/* A user message to the authenticated peer, its kind first in the header; `owned`: a
 * bulk one's data (send_ep). */
static int send_user(struct ofl_link *l, uint32_t kind, const void *hdr, size_t hlen,
                     const void *data, size_t len, void *owned)
{
    if (l->state != OFL_LINK_UP || kind < OFL_LINK_KIND_USER || kind >= OFL_LINK_KIND_MAX ||
        hlen > 252 || (owned && len > OFL_LINK_BULK_MAX)) {
        free(owned);
        return l->state == OFL_LINK_FAILED ? -EPIPE : -ENOTCONN;
    }
    uint8_t h[256];
    memcpy(h, &kind, 4);
    if (hlen) memcpy(h + 4, hdr, hlen);
    int rc = send_ep(l, l->peer, kind, h, hlen + 4, data, len, owned);
    if (!rc) l->sent_ns = now_ns();
    return rc;
}

int ofl_link_send(struct ofl_link *l, uint32_t kind, const void *hdr, size_t hlen,
                  const void *data, size_t len)
{
    return send_user(l, kind, hdr, hlen, data, len, NULL);
}

int ofl_link_send_bulk(struct ofl_link *l, uint32_t kind, const void *hdr, size_t hlen,
                       void *data, size_t len)
{
    return send_user(l, kind, hdr, hlen, NULL, len, data);
}

uint64_t ofl_link_bulk_in(const struct ofl_link *l) { return l->bulk_in; }

const char *ofl_link_error(const struct ofl_link *l) { return l->err; }

void ofl_link_set_silence(struct ofl_link *l, uint32_t ms)
{
    l->silence_ns = (uint64_t)(ms ? ms : 1) * 1000000u;
}
uint64_t ofl_link_refused(const struct ofl_link *l) { return l->refused; }
uint64_t ofl_link_beats(const struct ofl_link *l) { return l->beats_in; }
uint64_t ofl_link_unauth_drops(const struct ofl_link *l) { return l->unauth_drops; }
uint64_t ofl_link_lost_sends(const struct ofl_link *l) { return l->lost_sends; }

void ofl_link_close(struct ofl_link *l)
{
    if (!l) return;
    /* what was sent goes out first (bounded: a peer that takes nothing does not
     * hold the close up) */
    for (long spins = 0; l->inflight && spins < 1000000; spins++) ucp_worker_progress(l->worker);
    for (int i = 0; i < PENDING; i++)
        if (l->pend[i].ep) close_ep(l, l->pend[i].ep, false);
    if (l->peer) close_ep(l, l->peer, l->state == OFL_LINK_UP);
    if (l->listener) ucp_listener_destroy(l->listener);
    for (struct inbox *m = l->in_head; m; m = m->next)   /* bulk messages never fetched */
        if (m->desc) ucp_am_data_release(l->worker, m->desc);
    if (l->worker) ucp_worker_destroy(l->worker);
    while (l->sending) {   /* sends the closed endpoints never completed */
        struct sending *s = l->sending;
        l->sending = s->next;
        free(s->owned);
        free(s);
    }
    inbox_free(l);
    if (l->ctx) ucp_cleanup(l->ctx);
    if (l->secret) {
        memset(l->secret, 0, l->secret_len);
        free(l->secret);
    }
    free(l);
}
