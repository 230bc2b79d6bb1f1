/* Control messages: read and change a table of a running program from outside
 * (offlow ctl, offlow/control.py). Each table a process holds has a channel
 * "ctl.NAME" served by that process's channel manager; a message is one request, the
 * answer one reply (direct messages, at most OFL_CTL_MSG_MAX bytes, little-endian):
 *
 *   'i'                               info: the table's kind, element and counts
 *   'g' u32 index                     get: an array element's bytes
 *   's' u32 index, element bytes      set: an array element (exactly its size)
 *   'a' u8 len, u16 hop, 16 address   route add (IPv4: the address's first 4 bytes,
 *                                     network order; IPv6: all 16)
 *   'd' u8 len, 16 address            route delete
 *   'b'                               IPv6 routes: begin a batch (drops one not committed)
 *   'A' / 'D'                         ... an add / delete as 'a' / 'd', checked and kept
 *   'c'                               ... apply the batch as one update (one rebuild and
 *                                     swap): all of it, or none; the reply: u64 applied
 *
 * A reply starts with an i32 status: 0, then what was asked (info: struct
 * ofl_ctl_info; get: the element's bytes); or a negative errno, then a short text
 * saying why. A refused request leaves the table as it was.
 *
 * Larger entries (arrays and hash maps: ctl_stage.h serves these): a request longer
 * than one message is staged in parts and then run whole, and a reply longer than one
 * message is kept and read back in parts:
 *
 *   'S' u32 total                     stage a request of `total` bytes (its first byte
 *                                     the request's letter), dropping any staged before
 *   'P' u32 offset, bytes             its next part (offsets in order, from 0)
 *   'X'                               run the staged request, once all of it is there
 *   'R' u32 offset                    read the kept reply from `offset` (up to 52 bytes)
 *
 * A reply too long for one message has a positive status: its payload's length, kept
 * whole (one copy of the entry, made when the request ran) until the next request. */
#ifndef OFL_CTL_H
#define OFL_CTL_H

#include <stddef.h>
#include <stdint.h>

#define OFL_CTL_MSG_MAX 56

#define OFL_CTL_INFO 'i'
#define OFL_CTL_GET 'g'
#define OFL_CTL_SET 's'
#define OFL_CTL_ROUTE_ADD 'a'
#define OFL_CTL_ROUTE_DEL 'd'
#define OFL_CTL_BATCH_BEGIN 'b'
#define OFL_CTL_STAGE_ADD 'A'
#define OFL_CTL_STAGE_DEL 'D'
#define OFL_CTL_BATCH_COMMIT 'c'
#define OFL_CTL_STAGE_BEGIN 'S'
#define OFL_CTL_STAGE_PART 'P'
#define OFL_CTL_STAGE_RUN 'X'
#define OFL_CTL_READ 'R'

/* The most payload one reply carries (after its status), and one part carries. */
#define OFL_CTL_REPLY_MAX (OFL_CTL_MSG_MAX - 4)
#define OFL_CTL_PART_MAX (OFL_CTL_MSG_MAX - 5)
/* The longest request staged in parts, and the longest reply kept (bytes). */
#define OFL_CTL_STAGE_MAX 65536u
/* The longest request or reply payload of an array of `size`-byte elements (a set). */
#define OFL_CTL_ARRAY_STAGE(size) (5u + (size))

/* Table kinds (ofl_ctl_info.kind). */
#define OFL_CTL_ARRAY 1
#define OFL_CTL_LPM4 2
#define OFL_CTL_LPM6 3

/* The payload of an info reply. */
struct ofl_ctl_info {
    uint8_t kind;       /* OFL_CTL_ARRAY, _LPM4, _LPM6 */
    uint8_t type;       /* an array's elements: 'u' unsigned, 'i' signed, 'f' floating,
                           'b' bytes */
    uint16_t size;      /* bytes per element (arrays) */
    uint32_t pad;
    uint64_t length;    /* elements (arrays), routes (route tables) */
    uint64_t updates;   /* changes made through control messages */
};

/* A reply being written. */
struct ofl_ctl_reply {
    uint8_t b[OFL_CTL_MSG_MAX];
    size_t n;
};

/* A reply's payload too long for one message, kept for reads in parts ('R'). */
struct ofl_ctl_out {
    uint8_t *b;     /* cap bytes */
    size_t cap;
    size_t n;       /* the payload's length, when a reply was kept */
};

/* Reply status 0 and the `n` bytes at `p` (cut to what fits). */
void ofl_ctl_ok(struct ofl_ctl_reply *r, const void *p, size_t n);

/* Reply status 0 and the `n` bytes at `p` when they fit one reply; else keep them in
 * `out` (out->n = n) and reply status n; -EMSGSIZE when `out` is NULL or too small. */
void ofl_ctl_ok_out(struct ofl_ctl_reply *r, struct ofl_ctl_out *out, const void *p, size_t n);

/* Reply status `rc` (a negative errno) and the text of `fmt` (cut to what fits). */
void ofl_ctl_fail(struct ofl_ctl_reply *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answer message `msg` (`len` bytes) for an array of `n` elements of `size` bytes at
 * `base` whose type is `type` ('u', 'i', 'f', 'b'): info, get and set (a store of the
 * element's size: atomic for 1, 2, 4 and 8 bytes; a copy for other sizes, which the
 * datapath may read half-done); `*updates` counts the sets. A get of an element longer
 * than a reply is refused (-EMSGSIZE). */
void ofl_ctl_array(void *base, size_t size, size_t n, char type, uint64_t *updates,
                   const uint8_t *msg, size_t len, struct ofl_ctl_reply *r);

/* ofl_ctl_array whose get of a long element keeps it in `out` (ofl_ctl_ok_out); `msg`
 * may be longer than one message (a set staged in parts: ctl_stage.h). */
void ofl_ctl_array_out(void *base, size_t size, size_t n, char type, uint64_t *updates,
                       const uint8_t *msg, size_t len, struct ofl_ctl_out *out,
                       struct ofl_ctl_reply *r);

#endif
