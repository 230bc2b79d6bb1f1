/* One authenticated UCX connection between a host and a remote device (docs/remote.md).
 *
 * The device side listens (ofl_link_listen) on the address it is given; the host side
 * connects (ofl_link_connect). Messages are UCX active messages. Before anything else
 * the two prove the shared secret to each other (remote_auth.h): the server sends a
 * nonce, the client answers with its proof and a nonce of its own, the server checks
 * it and answers with its proof. A peer whose proof is wrong is refused (its endpoint
 * closed, the refusal counted and written to stderr), and so is one that sends no proof
 * within the silence limit (below); a message from a peer that has
 * not proved the secret never reaches the handler (counted in `unauth_drops`).
 *
 * Once up, each side sends a heartbeat whenever it has sent nothing for an eighth of
 * the silence limit; a peer heard from for longer than the limit is dead: the link
 * fails ("stopped answering"). A connection UCX sees drop fails it too ("lost").
 *
 * Single-threaded: one thread calls every function of a link (the bridge thread).
 * Handlers run inside ofl_link_progress and must not send. */
#ifndef OFL_REMOTE_LINK_H
#define OFL_REMOTE_LINK_H

#include <stddef.h>
#include <stdint.h>

struct ofl_link;

enum ofl_link_state {
    OFL_LINK_WAITING = 0,  /* no authenticated peer yet */
    OFL_LINK_UP = 1,       /* the peer proved the secret: messages flow */
    OFL_LINK_FAILED = 2,   /* refused, lost or closed: ofl_link_error says why */
};

/* The silence limit by default: a dead peer is noticed within a second. */
#define OFL_LINK_SILENCE_MS 800

/* First message kind a user of the link may use (lower ones are the handshake's). */
#define OFL_LINK_KIND_USER 16
#define OFL_LINK_KIND_MAX 64

/* Called for each message of kind `kind` (>= OFL_LINK_KIND_USER) from the
 * authenticated peer; `hdr` and `data` are valid during the call only. */
typedef void (*ofl_link_handler)(void *arg, uint32_t kind, const void *hdr, size_t hlen,
                                 const void *data, size_t len);

/* Listen on `addr`:`port` (port 0: any free one, see ofl_link_port) with `secret`
 * (copied). Returns 0 or a negative errno, with a message in `err`. */
int ofl_link_listen(struct ofl_link **out, const char *addr, uint16_t port,
                    const uint8_t *secret, size_t secret_len, ofl_link_handler fn, void *arg,
                    char *err, size_t errlen);

/* Connect to a listening device at `addr`:`port` with `secret`. The link is WAITING
 * until the handshake ends (ofl_link_progress). Returns 0 or a negative errno. */
int ofl_link_connect(struct ofl_link **out, const char *addr, uint16_t port,
                     const uint8_t *secret, size_t secret_len, ofl_link_handler fn,
                     void *arg, char *err, size_t errlen);

/* The port a listening link listens on. */
uint16_t ofl_link_port(const struct ofl_link *l);

/* Make progress (UCX and the handshake); returns the link's state. */
enum ofl_link_state ofl_link_progress(struct ofl_link *l);

/* Send a message of `kind` to the authenticated peer and wait for UCX to take it
 * (the buffers may be reused on return). Returns 0, -ENOTCONN (not UP) or -EPIPE (the
 * link failed: ofl_link_error says why). */
int ofl_link_send(struct ofl_link *l, uint32_t kind, const void *hdr, size_t hlen,
                  const void *data, size_t len);

/* Largest bulk message (ofl_link_send_bulk); a larger one from the peer is dropped. */
#define OFL_LINK_BULK_MAX (1ull << 30)

/* Send `len` bytes at `data` (malloc'd: the link owns it from the call on and frees it
 * when UCX is done) as a bulk message: UCX's rendezvous protocol, from the buffer
 * itself (zero-copy where the transport has it). The peer's handler gets it in the
 * order sent, among the other messages. Returns 0, -ENOTCONN, -EPIPE, -ENOMEM
 * (`data` is freed in every case). */
int ofl_link_send_bulk(struct ofl_link *l, uint32_t kind, const void *hdr, size_t hlen,
                       void *data, size_t len);

/* Bulk messages received from the peer. */
uint64_t ofl_link_bulk_in(const struct ofl_link *l);

/* Set the silence limit to `ms` milliseconds (0 counts as 1). */
void ofl_link_set_silence(struct ofl_link *l, uint32_t ms);

/* Why the link failed ("" while it has not). */
const char *ofl_link_error(const struct ofl_link *l);

/* Peers refused for a wrong proof, and messages dropped from unauthenticated peers. */
uint64_t ofl_link_refused(const struct ofl_link *l);
uint64_t ofl_link_unauth_drops(const struct ofl_link *l);

/* Messages to the peer that UCX took and could not deliver (each fails the link: "a
 * message to the peer was lost"). The test hook OFFLOW_REMOTE_TEST_SEND_FAIL=N (read
 * when the link is made; never set it otherwise) fails the Nth user message so. */
uint64_t ofl_link_lost_sends(const struct ofl_link *l);

/* Heartbeats received from the peer. */
uint64_t ofl_link_beats(const struct ofl_link *l);

/* Close the link and free it (NULL is ignored). */
void ofl_link_close(struct ofl_link *l);

#endif
