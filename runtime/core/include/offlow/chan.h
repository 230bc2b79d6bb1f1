/* Channels: named host <-> device message paths (NFComms' direct and bulk channels).
 *
 * A channel region is a block of shared memory (inside the program's window, or any
 * MAP_SHARED mapping) holding a table of up to `nchan` channels. A channel has two
 * ends: side OFL_CHAN_A (the host program, or the first device segment) and side
 * OFL_CHAN_B (the device: its copy engine moves bulk data). Each side owns one
 * cache line per channel that carries its message and its acknowledgement of the
 * other side's message (a message and its acknowledgement travel with one line
 * transfer each way; a reply posted right after a take often rides with it).
 *
 * Direct messages: up to OFL_CHAN_MSG_MAX (56) bytes, synchronous rendezvous (CSP):
 * ofl_chan_send returns once the receiver has taken the message.
 *
 * Bulk transfers: any size, both directions. Side A always describes its own buffer
 * (the source when A sends, the destination when A receives) as a scatter-gather
 * list of pages, sent to B in chunks of K entries (default 6; at most
 * OFL_CHAN_STAGE_SLOT bytes when the chunk may be staged or A receives, a quarter
 * of that at both ends of a transfer of at most one slot) over the direct path;
 * side B's copy engine moves the pages (memcpy in one process; between processes one
 * copy when A's buffer is registered memory (ofl_chan_mem below), else a bounce
 * through the channel's staging ring in the region, or process_vm_readv/writev of
 * A's pages when an end asks for it: ofl_chan_set_copy) and acknowledges each chunk
 * with bytes done, bytes outstanding and a status. An entry covers contiguous pages
 * up to a 16 KB boundary. While B copies chunk n, A posts chunk n+1. The receiver
 * posts its buffer with the size it expects: a different size fails on both sides
 * with -EMSGSIZE. A CRC32C over the payload is computed by the sender (sending A:
 * beside B's copy of each chunk) and checked by the receiver over the bytes that
 * landed, before the chunk is acknowledged: a mismatch fails on both sides with
 * -EBADMSG. One bulk transfer runs on a channel at a time.
 *
 * Progress: blocking calls make progress on their own thread (bounded spin, then
 * sched_yield, then, once the peer has been idle a while, short naps: wait.h). Device code that serves many channels uses a
 * manager (ofl_chan_mgr): a few threads that poll all registered channels with
 * non-blocking steps and run handlers, so the number of channels is not limited by
 * the number of threads and blocked senders never hold a manager thread.
 *
 * Liveness: each open end records its process id; a waiting call notices within
 * about a millisecond that the peer's process died (pidfd, else kill(pid, 0) and
 * /proc zombie state) and returns -EPIPE, as it does when the peer closes its end.
 *
 * Threads: one sending and one receiving thread per end at a time (they may be
 * different threads); a call that would overlap another on the same end in the
 * same role returns -EBUSY (checked without locked instructions: two calls that
 * start at the same instant may both pass). Errors are negative errno values (ofl_strerror gives
 * text): -ETIMEDOUT, -EPIPE (peer closed the channel or its process died), -ENOENT
 * (no channel of that name), -EINVAL (invalid id or argument), -EMSGSIZE, -EBADMSG
 * (CRC mismatch), -ECANCELED (the window's abort word is set), -EBUSY, -EPROTO (the
 * peer's pending message is of the other kind: a bulk transfer where a direct
 * message was expected, or the reverse; and side B's bulk send when side A started
 * one at the same moment: A has the right of way),
 * -ECONNABORTED (the peer gave up the bulk transfer: its timeout or abort), -EFAULT
 * (a scatter-gather entry does not lie in the peer's memory), -EINTR (the end's
 * interrupt fd turned readable: ofl_chan_set_intr). */
#ifndef OFL_CHAN_H
#define OFL_CHAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "offlow/crc32c.h"
#include "offlow/wait.h"

/* Largest direct message payload: a 64-byte line minus an 8-byte header. */
#define OFL_CHAN_MSG_MAX 56
/* Longest channel name, without the terminating NUL. */
#define OFL_CHAN_NAME_MAX 31
/* Default and largest number of scatter-gather entries per bulk chunk. */
#define OFL_CHAN_SG_DEFAULT 6
#define OFL_CHAN_SG_MAX 64
/* Largest chunk that goes through the staging ring (bounce path). Each channel has
 * a staging ring in the region: OFL_CHAN_STAGE_MAX bytes in regions of at most 16
 * channels, 256 KB up to 256 channels, 128 KB beyond (a ring reused less often
 * stays out of the reading core's cache longer, which makes the writer's stores
 * cheaper); see ofl_chan_region_size. */
#define OFL_CHAN_STAGE_SLOT 65536
#define OFL_CHAN_STAGE_MAX (1u << 20)
/* Timeouts in nanoseconds: 0 tries once, OFL_CHAN_FOREVER never times out. */
#define OFL_CHAN_FOREVER UINT64_MAX
/* A send whose receiver is waiting (blocked in recv, or served by a manager) gives
 * it this long to take the message, even past a shorter timeout (0 included). */
#define OFL_CHAN_GRACE_NS 200000ull
/* Most ends one manager serves. */
#define OFL_CHAN_MGR_MAX_ENDS 16384

enum ofl_chan_side { OFL_CHAN_A = 0, OFL_CHAN_B = 1 };

/* How bulk bytes move (ofl_chan_set_copy). AUTO: memcpy in one process; across
 * processes one copy by B from or into A's registered memory (ofl_chan_mem), else
 * the bounce through the staging ring (A copies each chunk in, B copies it out, both
 * in parallel: several times faster than process_vm_* on the machines measured, see
 * offlow bench channels). VM: process_vm_readv/writev of A's pages by
 * address (the emulated DMA), even in one process; the bounce when the kernel
 * refuses it. BOUNCE: always through the staging ring. Either end's VM or BOUNCE
 * binds both ends. */
enum ofl_chan_copy { OFL_CHAN_COPY_AUTO = 0, OFL_CHAN_COPY_VM = 1, OFL_CHAN_COPY_BOUNCE = 2 };

/* Copy paths, as bits of ofl_chan_stats.paths. MEM: one copy between side A's
 * registered memory (ofl_chan_mem) and side B's buffer in another process. */
enum { OFL_CHAN_PATH_MEMCPY = 1, OFL_CHAN_PATH_VM = 2, OFL_CHAN_PATH_BOUNCE = 4,
       OFL_CHAN_PATH_MEM = 8 };

/* Counters of one end (read them with ofl_chan_get_stats). */
struct ofl_chan_stats {
    uint64_t sent;            /* direct messages the peer took (ofl_chan_send) */
    uint64_t posted;          /* messages queued with ofl_chan_post */
    uint64_t received;        /* direct messages taken */
    uint64_t withdrawn;       /* messages taken back, never seen by the peer: sends
                                 that timed out, and posts still pending when this
                                 end closed or its peer did (a manager's end) */
    uint64_t bulk_sent;       /* bulk transfers completed as sender */
    uint64_t bulk_received;   /* bulk transfers completed as receiver */
    uint64_t bulk_failed;     /* bulk transfers that ended in an error */
    uint64_t chunks;          /* bulk chunks acknowledged */
    uint64_t bytes_memcpy;    /* bulk bytes moved by each path */
    uint64_t bytes_vm;
    uint64_t bytes_bounce;
    uint64_t bytes_mem;
    uint32_t paths;           /* OFL_CHAN_PATH_* bits of the paths used so far */
};

/* Progress of the current or last bulk transfer on this end. */
struct ofl_chan_bulk_stat {
    uint64_t done;          /* bytes acknowledged */
    uint64_t outstanding;   /* bytes still to move */
    int status;             /* 0, or the error that ended it */
    uint32_t chunks;        /* chunks acknowledged */
};

/* One end of a channel as seen by one process; owned by the caller, and not to be
 * copied while open (a peer in the same process finds it by address). The fields
 * are the library's: read them through the functions below. */
struct ofl_chan_end {
    void *region;
    void *ctl;                /* the channel's control block in the region */
    void *line_mine;          /* this side's line (message + ack of the peer's) */
    const void *line_peer;    /* the other side's line */
    uint8_t *stage;           /* the channel's staging ring */
    const volatile uint32_t *abort_flag;
    uint32_t id;
    int side;                 /* OFL_CHAN_A or OFL_CHAN_B */
    uint32_t sg_per_chunk;    /* K: entries per bulk chunk (A side), default 6 */
    int copy;                 /* enum ofl_chan_copy */
    uint32_t gen;             /* our side's open generation (odd while open; atomic) */
    uint8_t busy[2];          /* a call in progress in role TX / RX (atomic) */
    /* What this end last wrote to its line (hints that spare the message path loads
     * of shared lines; a stale hint costs a retry, never a wrong answer; atomic) */
    uint64_t tx_hdr;          /* our header as we last wrote it */
    uint32_t tx_seq;          /* sequence number of our last message (written and
                                 read by the sending role only, so never stale
                                 there, unlike tx_hdr, which a receiving thread's
                                 acknowledgement also rewrites) */
    uint32_t tx_done;         /* sequence number of our last message known taken */
    uint32_t cookie;          /* identifies this struct to a peer in the same process */
    int intr_fd;              /* readable: blocking calls end with -EINTR (-1: none) */
    uint64_t try_check_ns;    /* try calls: when to ask whether the peer's process lives */
    uint32_t dead_gen;        /* the peer session found dead (its gen), 0: none (atomic) */
    uint32_t stage_size;      /* bytes of the staging ring (a power of two) */
    /* side B's copy engine: what it learned about the peer session `vm_gen` */
    uint32_t vm_gen;
    int vm_state;             /* 0 unknown, 1 process_vm_* works, -1 it does not */
    const struct ofl_chan_end *peer_end;  /* the peer's end when in this process */
    /* side B: its mapping of the peer's registered memory (chan_mem.c) */
    uint8_t *mem_base;        /* NULL: none (atomic: close and a call may race) */
    uint64_t mem_len;
    uint64_t mem_ino;
    int32_t mem_pid;
    int32_t mem_fd;           /* the peer's descriptor number of its memfd */
    const uint8_t *bulk_buf;  /* our bulk buffer while a transfer runs (read by a */
    uint64_t bulk_len;        /*   same-process peer to bound its copies; atomic) */
    uint64_t corrupt_at;      /* tests only: flip this payload byte after copying
                                 (UINT64_MAX: never); see ofl_chan_inject_corruption */
    struct ofl_chan_bulk_stat progress;   /* updated with atomic stores */
    struct ofl_chan_stats stats;          /* updated with atomic adds */
};

/* Bytes a region of `nchan` channels needs (a multiple of 4096): control blocks
 * plus a staging ring per channel (touched only by the bounce path, so on tmpfs or
 * anonymous memory they cost nothing until used). 0 when nchan is 0 or too large. */
size_t ofl_chan_region_size(uint32_t nchan);

/* Format `size` bytes at `mem` (64-byte aligned, zeroed or not) as an empty region
 * of `nchan` channels. Writes only the control blocks. Returns 0 or -EINVAL (too
 * small, misaligned, nchan 0). */
int ofl_chan_region_format(void *mem, size_t size, uint32_t nchan);

/* Create channel `name` (1..OFL_CHAN_NAME_MAX bytes) in a formatted region.
 * Returns its id (>= 0), -EEXIST, -ENOSPC (table full), -EINVAL (bad name or not a
 * region). Safe against concurrent creators in several processes (a creator that
 * dies holding the table lock is detected and the lock taken over). */
int ofl_chan_create(void *region, const char *name);

/* Id of channel `name`, or -ENOENT / -EINVAL. */
int ofl_chan_lookup(const void *region, const char *name);

/* Name of channel `id` (NUL-terminated, inside the region), or NULL. */
const char *ofl_chan_name(const void *region, uint32_t id);

/* Open side `side` of channel `id`: records this process's pid and marks the end
 * open. Returns 0, -EINVAL (bad id or side, not a region), -EBUSY (that side is
 * already open by a live process). A side left open by a dead process is taken
 * over, its pending message withdrawn. `abort_flag` (may be NULL) ends waits with
 * -ECANCELED when it becomes nonzero. */
int ofl_chan_open(struct ofl_chan_end *e, void *region, uint32_t id, int side,
                  const volatile uint32_t *abort_flag);

/* The peer side as this end sees it now: 1 open by a live process, 0 not opened
 * yet, -EPIPE closed or its process gone (pidfd, else kill and /proc), -EINVAL for
 * an end never opened. One look, no waiting. */
int ofl_chan_peer_state(const struct ofl_chan_end *e);

/* The peer side's session: a number that changes each time that side is opened or
 * closed (odd while open; a side a dead process left open keeps its number until
 * another takes it over), 0 when never opened or for an end never opened. A handler
 * tells one client from the next by it (ctl_stage.h). One load, no system call. */
uint32_t ofl_chan_peer_session(const struct ofl_chan_end *e);

/* Close the end: a peer blocked on it (or starting a call later) gets -EPIPE; our
 * pending post is withdrawn (counted in `withdrawn`). Idempotent. Call it when no other call on the end
 * runs, except that a blocked call on another thread returns -EPIPE. */
void ofl_chan_close(struct ofl_chan_end *e);

/* ofl_chan_close, saying why: `err` (a negative errno: a channel manager's handler
 * failed with it) is what ofl_chan_peer_why tells the peer. */
void ofl_chan_close_why(struct ofl_chan_end *e, int err);

/* Why the peer closed its side (ofl_chan_close_why's negative errno), or 0: it is
 * open, was never opened, closed without a reason, or its process is gone. */
int ofl_chan_peer_why(const struct ofl_chan_end *e);

/* Give the end an interrupt fd (-1: none, the default): while it is readable (a
 * byte written to a pipe: Python's signal wakeup fd), a blocking call on the end
 * returns -EINTR within about a millisecond, or at once from a nap (wait.h); a send
 * is then withdrawn, a receive takes nothing, a bulk transfer fails on both sides.
 * The fd is only polled, never read. Returns 0 or -EINVAL. */
int ofl_chan_set_intr(struct ofl_chan_end *e, int fd);

/* Set K, the scatter-gather entries per bulk chunk (1..OFL_CHAN_SG_MAX).
 * Returns 0 or -EINVAL. */
int ofl_chan_set_chunk(struct ofl_chan_end *e, uint32_t k);

/* Choose how bulk bytes move (enum ofl_chan_copy); BOUNCE on either end makes both
 * use the staging slots. Returns 0 or -EINVAL. */
int ofl_chan_set_copy(struct ofl_chan_end *e, int mode);

/* Direct send of `len` <= OFL_CHAN_MSG_MAX bytes; returns once the peer has taken
 * it (0), or -ETIMEDOUT after `timeout_ns`, -EPIPE, -EMSGSIZE, -ECANCELED, -EBUSY.
 * A send that timed out is withdrawn: the peer never sees it. */
int ofl_chan_send(struct ofl_chan_end *e, const void *msg, size_t len, uint64_t timeout_ns);

/* ofl_chan_send with a zero timeout: -EAGAIN instead of -ETIMEDOUT when the peer
 * is not ready to take the message now (ready: blocked in recv, or served by a
 * manager; such a peer gets up to OFL_CHAN_GRACE_NS to take it); -EPIPE, not -EAGAIN,
 * once the peer closed or its process is gone (asked of the kernel at most every
 * OFL_WAIT_CHECK_NS: a loop of try calls learns of a death within about 1 ms). */
int ofl_chan_try_send(struct ofl_chan_end *e, const void *msg, size_t len);

/* Direct receive into `buf` (capacity `cap`); returns the message length (>= 0),
 * -ETIMEDOUT, -EPIPE (peer closed and nothing is pending), -EMSGSIZE (message longer
 * than cap: it stays pending), -ECANCELED, -EBUSY, -EPROTO (the peer is starting a
 * bulk transfer: its message stays pending for ofl_chan_bulk_recv). */
int ofl_chan_recv(struct ofl_chan_end *e, void *buf, size_t cap, uint64_t timeout_ns);

/* ofl_chan_recv with a zero timeout: -EAGAIN when no message is pending; -EPIPE
 * when none is and the peer closed or its process is gone (as ofl_chan_try_send). */
int ofl_chan_try_recv(struct ofl_chan_end *e, void *buf, size_t cap);

/* Queue a message on `e` without blocking: the peer takes it with its next receive
 * (a reply from a manager's handler, for example). Returns 0, -ENOBUFS (our
 * previous post is not taken yet), -EMSGSIZE, -EBUSY (a send or a bulk transfer is
 * using the line), -EPIPE (closed). ofl_chan_post_done tells when it was taken. */
int ofl_chan_post(struct ofl_chan_end *e, const void *msg, size_t len);

/* 1 when nothing we posted is waiting to be taken (or withdrawn), else 0. */
int ofl_chan_post_done(const struct ofl_chan_end *e);

/* Bulk send of `len` bytes at `buf`; the peer must post a bulk receive of exactly
 * `len` bytes. Returns 0 once every byte was acknowledged (and, toward side A,
 * verified), or -EMSGSIZE (size mismatch), -EBADMSG (the receiver's CRC differs),
 * -ETIMEDOUT (no progress for `timeout_ns`), -EPIPE, -ECANCELED, -ECONNABORTED,
 * -EFAULT, -EPROTO, -EBUSY. */
int ofl_chan_bulk_send(struct ofl_chan_end *e, const void *buf, size_t len,
                       uint64_t timeout_ns);

/* Bulk receive into `buf` of exactly `len` bytes. Returns 0 when all bytes landed
 * and their CRC32C matched, or -EMSGSIZE, -EBADMSG (corrupted: the buffer holds no
 * good data), -ETIMEDOUT (no progress for `timeout_ns`), -EPIPE, -ECANCELED,
 * -ECONNABORTED, -EFAULT, -EPROTO, -EBUSY. */
int ofl_chan_bulk_recv(struct ofl_chan_end *e, void *buf, size_t len, uint64_t timeout_ns);

/* ---- Registered memory: side A's buffers that side B's copy engine reaches
 * directly, as a DMA engine reads registered host pages ----
 *
 * Between processes a bulk transfer from or into plain memory goes through the
 * channel's staging ring (two copies, one per side). A buffer in registered memory
 * (a sealed memfd that B maps once, through /proc/<pid>/fd, and keeps mapped while
 * the peer's transfers keep using it) is copied once: B moves the bytes between it
 * and its own buffer with the CRC in the same pass. The scatter-gather entries then
 * carry offsets into the registered memory instead of addresses (its pages, as an
 * RDMA memory region's). When B cannot map it (another user, no /proc), the
 * transfer falls back to the staging ring by itself. */
struct ofl_chan_mem {
    uint8_t *addr;            /* the mapping in this process */
    uint64_t len;             /* its bytes */
    int fd;                   /* the memfd (sealed against shrinking) */
    uint64_t ino;             /* its inode: tells a reused descriptor number apart */
};

/* A new sealed memfd of `len` bytes (its size can no longer change): the
 * descriptor, or -errno. For callers that map it themselves (ofl_chan_mem_attach). */
int ofl_chan_mem_create(size_t len);

/* Describe `len` bytes mapped MAP_SHARED at `addr` from memfd `fd` (made by
 * ofl_chan_mem_create): 0, or -EINVAL (not a memfd sealed against shrinking, or
 * smaller than len). The caller keeps the fd open and the mapping while in use. */
int ofl_chan_mem_attach(struct ofl_chan_mem *m, int fd, void *addr, size_t len);

/* Allocate `len` bytes of registered memory (create, map, attach): 0 or -errno. */
int ofl_chan_mem_alloc(struct ofl_chan_mem *m, size_t len);

/* Unmap and close memory from ofl_chan_mem_alloc (after its transfers ended; a peer
 * that mapped it keeps its own mapping until it maps another or closes). */
void ofl_chan_mem_free(struct ofl_chan_mem *m);

/* ofl_chan_bulk_send / ofl_chan_bulk_recv of the `len` bytes at offset `off` of
 * registered memory `m`: on side A toward a peer in another process, one copy by
 * B's copy engine instead of two. -EINVAL when the range lies outside `m`. */
int ofl_chan_bulk_send_mem(struct ofl_chan_end *e, const struct ofl_chan_mem *m, size_t off,
                           size_t len, uint64_t timeout_ns);
int ofl_chan_bulk_recv_mem(struct ofl_chan_end *e, const struct ofl_chan_mem *m, size_t off,
                           size_t len, uint64_t timeout_ns);

/* Progress of the current or last bulk transfer on this end (any thread). */
void ofl_chan_bulk_progress(const struct ofl_chan_end *e, struct ofl_chan_bulk_stat *st);

/* A snapshot of the end's counters (any thread). */
void ofl_chan_get_stats(const struct ofl_chan_end *e, struct ofl_chan_stats *st);

/* Tests only: corrupt payload byte `offset` of the next bulk transfer this end
 * receives, after the bytes landed and before the CRC check (UINT64_MAX: none). */
void ofl_chan_inject_corruption(struct ofl_chan_end *e, uint64_t offset);

/* ---- Managers: device-side service of many channels by a few threads ---- */

/* A direct-message handler: runs on a manager thread for each message that arrives
 * on channel `e`. It may reply with ofl_chan_post (never a blocking call). Returns
 * 0, or a negative errno that closes the channel. After a reply, the end takes its
 * next message only once the peer has taken that reply (the peer's next send waits
 * for it), so a handler's reply never finds the line still busy with the last one
 * (a reply left for a peer that died is withdrawn when the next peer sends). */
typedef int (*ofl_chan_handler)(void *ctx, struct ofl_chan_end *e, const void *msg,
                                size_t len);

/* A bulk handler: a bulk transfer of `len` bytes toward this end was announced;
 * return the buffer to receive into (NULL refuses it: the sender gets -EMSGSIZE).
 * `done` is then called with the transfer's status and the same buffer. `sent`
 * (may be NULL) is called when a send queued with ofl_chan_mgr_bulk_send ends, with
 * its status (0: the peer verified every byte) and buffer, which the caller may
 * reuse from then on. All run on a manager thread and must not block. */
struct ofl_chan_bulk_handler {
    void *(*begin)(void *ctx, struct ofl_chan_end *e, size_t len);
    void (*done)(void *ctx, struct ofl_chan_end *e, void *buf, size_t len, int status);
    void (*sent)(void *ctx, struct ofl_chan_end *e, const void *buf, size_t len, int status);
};

struct ofl_chan_mgr;

/* Start `nthreads` (1..64) manager threads (pinned to nothing). Returns NULL on
 * ENOMEM, a thread that cannot start, or a bad count. */
struct ofl_chan_mgr *ofl_chan_mgr_start(unsigned nthreads,
                                        const volatile uint32_t *abort_flag);

/* Serve side `side` of channel `id` in `region`: direct messages go to `on_msg`
 * (may be NULL: they stay pending), bulk transfers to `on_bulk` (may be NULL: they
 * are refused). Returns 0, -EBUSY, -EINVAL, -ENOSPC, -ENOMEM. Can be called while the
 * manager runs, from any thread. An end whose handler failed (closing it) may be
 * served again: ofl_chan_mgr_bulk_send then finds the new service. */
int ofl_chan_mgr_serve(struct ofl_chan_mgr *m, void *region, uint32_t id, int side,
                       ofl_chan_handler on_msg, const struct ofl_chan_bulk_handler *on_bulk,
                       void *ctx);

/* Queue a bulk send of the `len` bytes at `buf` on the end that `m` serves as side
 * `side` of channel `id` in `region` (its peer takes it with ofl_chan_bulk_recv):
 * the end's manager thread runs it step by step beside its other ends, then calls
 * the end's `sent` handler. `buf` must stay untouched until then. Any thread may
 * call it, a handler too (an answer in bulk), until ofl_chan_mgr_stop begins. A send
 * still queued when its end closes (a handler failed) or the manager stops ends with
 * -EPIPE or -ECANCELED in `sent`. Finds the end in constant time (an index by
 * channel and side). Returns 0, -EINVAL (no manager, a bad
 * region or buffer), -ENOENT (no such served end), -EPIPE (its handler closed it)
 * or -EBUSY (a send queued there has not started yet). */
int ofl_chan_mgr_bulk_send(struct ofl_chan_mgr *m, void *region, uint32_t id, int side,
                           const void *buf, size_t len);

/* ofl_chan_post on the end that `m` serves as side `side` of channel `id` in
 * `region`, from any thread but a handler's (a proxy relaying messages it got
 * elsewhere): 0, -ENOBUFS (the previous post is not taken yet), -EBUSY (a bulk send
 * is queued or running there, or its handler is running: try again; so the manager
 * knows exactly whether the handler replied), -EPIPE (its handler closed it; a post
 * to a peer that closed is withdrawn when the manager sees it:
 * ofl_chan_mgr_peer_closed), -ENOENT, -EINVAL, -EMSGSIZE. */
int ofl_chan_mgr_post(struct ofl_chan_mgr *m, void *region, uint32_t id, int side,
                      const void *msg, size_t len);
/* ofl_chan_post_done on that end: 1 when nothing posted there waits to be taken (or
 * the end is closed or not served), else 0. */
int ofl_chan_mgr_post_done(struct ofl_chan_mgr *m, void *region, uint32_t id, int side);
/* ofl_chan_peer_state of that end (-EINVAL when it is not served). */
int ofl_chan_mgr_peer_state(struct ofl_chan_mgr *m, void *region, uint32_t id, int side);
/* 1 when the peer of that end has closed its end (and not opened it again), 0 when it
 * is open or never opened, -EINVAL when the end is not served. Reads the peer's word
 * only (no system call, unlike ofl_chan_mgr_peer_state: a relay asks it per message). */
int ofl_chan_mgr_peer_closed(struct ofl_chan_mgr *m, void *region, uint32_t id, int side);
/* Stop the threads, close every served end (a transfer in progress ends with
 * -ECANCELED in its done or sent handler, as does a queued send; a post still
 * pending is withdrawn and counted), free the manager. */
void ofl_chan_mgr_stop(struct ofl_chan_mgr *m);
/* ofl_chan_mgr_stop, and `sum` (may be NULL) gets the counters of every end it
 * served added up (`paths`: their union), taken after the ends closed: `withdrawn`
 * counts the posts their peers never took. */
void ofl_chan_mgr_stop_sum(struct ofl_chan_mgr *m, struct ofl_chan_stats *sum);

#endif
