/* The send port: where a host program hands large sends to the device, as the LSO
 * seed's host interface does. It is a window of its own (window.h: a 0600 file in
 * /dev/shm, created by the host side, mapped by both) that holds:
 *
 *   - a header: the geometry and the two sides' process ids;
 *   - the descriptor FIFO, host -> NIC: an SPSC ring (ring.h) of struct ofl_lso_desc
 *     (where the payload lies in the send buffer, its length, the MSS, flags and the
 *     header template), one entry per send, h.len bytes of it used;
 *   - the completion FIFO, NIC -> host: a ring of struct ofl_lso_done, one per
 *     descriptor, in the order they were posted;
 *   - the send buffer, double-buffered: two halves; the host writes payloads into one
 *     while the NIC cuts the sends of the other, and it reuses a half only once every
 *     send in it has completed.
 *
 * The NIC reads descriptors through a packet source (kind "lso": each descriptor
 * becomes one packet, its bytes as posted) and cuts them with ofl_lso_nic (lso_nic.h),
 * which reads the payloads from the send buffer and posts the completions. Each side
 * watches the other's process while it waits: a side that dies is noticed within
 * about a millisecond. */
#ifndef OFL_LSO_PORT_H
#define OFL_LSO_PORT_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/lso.h"
#include "offlow/ring.h"
#include "offlow/src.h"
#include "offlow/wait.h"
#include "offlow/window.h"

#define OFL_LSO_PORT_MAGIC 0x31544f504f534c00ull /* "\0LSOPOT1" little-endian */
#define OFL_LSO_PORT_VERSION 1u
/* Bytes of one descriptor FIFO entry: the entry header, the fixed part, the template. */
#define OFL_LSO_DESC_ENTRY (8u + (uint32_t)sizeof(struct ofl_lso_desc))
/* Completions a host keeps for ofl_lso_host_reap (older ones are counted only). */
#define OFL_LSO_KEEP 4096u

/* The port's header, at OFL_WINDOW_HDR_SIZE in its window. */
struct ofl_lso_port_hdr {
    uint64_t magic;                /* OFL_LSO_PORT_MAGIC */
    uint32_t version;              /* OFL_LSO_PORT_VERSION */
    uint32_t half;                 /* bytes in each half of the send buffer */
    uint64_t desc_off, desc_len;   /* the descriptor FIFO (ring memory) */
    uint64_t done_off, done_len;   /* the completion FIFO */
    uint64_t buf_off;              /* the send buffer: 2 * half bytes */
    volatile int32_t host_pid;     /* the host program (its creator) */
    volatile int32_t nic_pid;      /* the device process, once it attached */
};

/* A completion, as the NIC posts it. */
struct ofl_lso_done {
    int32_t status;     /* 0: cut; else the OFL_LSO_E* reason the descriptor was refused */
    uint32_t tag;       /* the descriptor's (0 when it was too short to hold one) */
    uint32_t packets;   /* packets made */
    uint32_t len;       /* payload bytes cut */
};

/* The geometry of a port and where each part sits; attach checks it against the
 * window. */
struct ofl_lso_port {
    struct ofl_window win;
    struct ofl_lso_port_hdr *hdr;
    uint8_t *buf;       /* the send buffer */
    uint64_t buf_len;   /* 2 * half */
};

/* Map the port window at `path` and check its header: magic, version, every part
 * within the file. Returns 0, or -ENOENT / -EINVAL (not a send port) / another
 * negative errno. */
int ofl_lso_port_attach(struct ofl_lso_port *p, const char *path);

/* Unmap (the file stays: the host removes it). Idempotent. */
void ofl_lso_port_detach(struct ofl_lso_port *p);

/* ---- the host side ------------------------------------------------------------------ */

/* One send, as a host program gives it. */
struct ofl_lso_send {
    const uint8_t *tmpl;    /* header template (lso.h's rules), tlen bytes */
    uint32_t tlen;
    const void *payload;    /* len bytes, copied into the send buffer */
    uint32_t len;
    uint16_t mss, flags;    /* lso.h */
    uint32_t frag_id, tag;
};

struct ofl_lso_host {
    struct ofl_lso_port p;
    char path[256];
    struct ofl_ring desc, done;
    uint32_t fill;           /* the half being filled */
    uint32_t fill_off;       /* bytes used in it */
    uint32_t busy[2];        /* sends in each half not yet completed */
    uint8_t *posted;         /* the half of each send not yet completed, in posting order
                                (2: a raw descriptor, in no half) */
    uint32_t posted_head, posted_tail, cap;  /* cap: sends outstanding at most */
    int nic_pidfd;
    struct ofl_lso_done *kept;   /* completions not yet reaped (OFL_LSO_KEEP at most) */
    uint32_t nkept;
    /* counters */
    uint64_t sends, bytes, completed, refused, packets, waits, forgotten;
};

/* sizeof(struct ofl_lso_host), for callers that allocate it elsewhere (Python). */
size_t ofl_lso_host_size(void);

/* Create the port file `path` (must not exist) with a send buffer of two halves of
 * `half` bytes (at least OFL_LSO_SEND_MAX; raised to hold the largest send and its
 * headroom, rounded up to 4 KiB) and FIFOs of
 * `entries` descriptors (a power of two >= 2); the completion FIFO holds 2 * entries,
 * which bounds the sends outstanding. Returns 0, -EINVAL or a negative errno (the
 * file is not left behind). */
int ofl_lso_host_create(struct ofl_lso_host *h, const char *path, uint32_t half,
                        uint32_t entries);

/* Post one send: its payload is copied into the half being filled after
 * OFL_LSO_HEADROOM_BYTES of headroom (the device may write packet headers there: the
 * descriptor says OFL_LSO_HEADROOM), switching halves when it is full, after every send
 * of the other half has completed, and its descriptor into the FIFO. Waits (bounded spin, then yield) for room, reaping
 * completions meanwhile, up to `timeout_ns` (0: for ever).
 * Returns 0; -EINVAL (a template lso.h refuses, MSS 0, a payload over
 * OFL_LSO_SEND_MAX), -EMSGSIZE (a payload and its headroom larger than a half), -ETIMEDOUT, -EPIPE (the
 * device process exited, or its source broke the FIFO: it failed; at once, not after a
 * wait). Checks that need the link (the MTU) are the NIC's. */
int ofl_lso_host_send(struct ofl_lso_host *h, const struct ofl_lso_send *s, uint64_t timeout_ns);

/* Post `dlen` bytes as a descriptor exactly as given (a test's malformed one; at most
 * sizeof(struct ofl_lso_desc)): nothing is written into the send buffer. Waits as
 * ofl_lso_host_send. Returns 0, -EMSGSIZE, -ETIMEDOUT or -EPIPE. */
int ofl_lso_host_post_raw(struct ofl_lso_host *h, const void *desc, uint32_t dlen,
                          uint64_t timeout_ns);

/* Take the completions that arrived (without waiting), oldest first, up to `max`
 * into `out`. Returns how many. */
uint32_t ofl_lso_host_reap(struct ofl_lso_host *h, struct ofl_lso_done *out, uint32_t max);

/* No more sends: close the descriptor FIFO (the NIC's source ends once it is empty)
 * and wait until every send has completed. Returns 0, -ETIMEDOUT or -EPIPE. */
int ofl_lso_host_finish(struct ofl_lso_host *h, uint64_t timeout_ns);

/* Unmap the port and remove its file. Idempotent. */
void ofl_lso_host_destroy(struct ofl_lso_host *h);

/* ---- the device side: descriptors in ------------------------------------------------- */

/* A packet source (src.h) of kind "lso": each descriptor in the FIFO of the port at
 * `path` becomes one packet (its bytes as posted; ts_ns the time it was taken). It
 * ends when the host has finished and the FIFO is empty; a host that exits without
 * finishing is -EPIPE. One core reads a port: nparts above 1 is -EINVAL. */
int ofl_lso_src_open(struct ofl_src **s, const char *path, const struct ofl_src_opts *o,
                     char *errbuf);

#endif
