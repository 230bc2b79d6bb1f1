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
 * saying why. A refused request leaves the table as it was. */
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

/* Reply status 0 and the `n` bytes at `p` (cut to what fits). */
void ofl_ctl_ok(struct ofl_ctl_reply *r, const void *p, size_t n);

/* Reply status `rc` (a negative errno) and the text of `fmt` (cut to what fits). */
void ofl_ctl_fail(struct ofl_ctl_reply *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answer message `msg` (`len` bytes) for an array of `n` elements of `size` bytes at
 * `base` whose type is `type` ('u', 'i', 'f', 'b'): info, get and set (a store of the
 * element's size: atomic for 1, 2, 4 and 8 bytes); `*updates` counts the sets. */
void ofl_ctl_array(void *base, size_t size, size_t n, char type, uint64_t *updates,
                   const uint8_t *msg, size_t len, struct ofl_ctl_reply *r);

#endif
