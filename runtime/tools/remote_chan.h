/* Channels across the remote link (docs/remote.md): each end of the link stands in
 * for the far end of the program's channels. The host's stand-in serves side B of
 * each channel in the run's window (where the host program is side A), the device's
 * server side A in the device's window (where the device serves side B). A direct
 * message or a bulk transfer taken on one side crosses the link (direct: a message
 * of its own; bulk: UCX's rendezvous protocol, with the sender's CRC32C of the whole
 * transfer, checked at the far end before it is handed on) and is handed to the
 * far end's channel in the order it came: direct messages posted, bulk transfers sent
 * through the channel's manager. Both sides add the same channels in the same order;
 * the host's end adds them once the device's process serves them (PART_CHANS_UP).
 *
 * The handlers run on the channel manager's thread and only queue; the link's thread
 * sends and delivers (part_chans_poll). */
#ifndef OFL_REMOTE_CHAN_H
#define OFL_REMOTE_CHAN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offlow/chan.h"
#include "offlow/remote_link.h"

#define PART_CHANS_MAX 64   /* channels carried at most */

/* The link's message kinds of the channels (below the run's control messages). */
enum {
    PART_CHAN_MSG = OFL_LINK_KIND_USER + 4,  /* u32 channel index; the direct message */
    PART_CHAN_BULK,                          /* struct part_bulk_hdr; the bytes */
};

struct part_bulk_hdr {
    uint32_t idx;     /* the channel's index */
    uint32_t crc;     /* CRC32C of the bytes, by the sender */
    uint64_t len;     /* bytes */
};

/* A direct message or a bulk transfer on its way (`data`: malloc'd, `len` bytes). */
struct part_item {
    struct part_item *next;
    uint32_t idx;             /* the channel's index */
    bool bulk;
    size_t len;
    uint8_t *data;
};

/* Free an item and its data. */
void part_item_free(struct part_item *it);

/* One channel carried. */
struct part_chan {
    struct part_chans *pc;
    uint32_t id;                     /* its id in the region */
    struct part_item *head, *tail;   /* from the far end, to hand on here in order */
    uint32_t sending;                /* a bulk transfer handed on is running (atomic) */
};

struct part_chans {
    struct ofl_chan_mgr *mgr;
    void *region;
    int side;                        /* the side served here */
    struct ofl_link *link;
    struct part_chan ch[PART_CHANS_MAX];
    uint32_t n;
    pthread_mutex_t lock;            /* guards up_head/up_tail */
    struct part_item *up_head, *up_tail;   /* taken here, to send across */
    uint64_t corrupt_at;             /* tests: flip this byte of the next bulk sent after
                                        its CRC (OFFLOW_REMOTE_TEST_CORRUPT; ~0: never) */
    uint64_t fail_post_at;           /* tests: the direct message handed on here that
                                        fails as if the end were closed, counted from 1
                                        (OFFLOW_REMOTE_TEST_POST_FAIL; 0: none) */
    bool hold;                       /* tests: hand nothing on here, as if the end here
                                        never took it (OFFLOW_REMOTE_TEST_HOLD) */
    uint64_t posts;                  /* direct messages handed on here (tries that ended) */
    uint64_t msgs_out, msgs_in, bulk_out, bulk_in, bytes_out, bytes_in;
    uint64_t dropped;                /* what came that the end here could not take */
    uint64_t peer_closed;            /* what came after the end here had closed: never
                                        handed on */
    uint64_t stop_unhanded;          /* at the stop: what had come and was not handed on */
    uint64_t stop_unsent;            /* at the stop: what was taken here and not sent */
    uint64_t untaken;                /* handed on here, never taken by the end here: a
                                        direct message withdrawn (at the stop or at
                                        the end's close), a bulk send that ended with
                                        EPIPE or ECANCELED (atomic) */
    char err[256];                   /* why the channels failed ("": they have not) */
};

/* Carry channels `ids[0..n)` of `region` (chan.h), serving side `side` here with a
 * manager of one thread (`abort_flag`: the window's). Returns 0, or a negative errno
 * with the reason in pc->err. */
int part_chans_start(struct part_chans *pc, struct ofl_link *link, void *region, int side,
                     const uint32_t *ids, uint32_t n, const volatile uint32_t *abort_flag);

/* The link's handler for PART_CHAN_* messages. A message that breaks the rules, or a
 * bulk transfer whose CRC32C differs, fails the channels (pc->err). */
void part_chans_on_msg(struct part_chans *pc, uint32_t kind, const void *hdr, size_t hlen,
                       const void *data, size_t len);

/* Send what was taken here, hand on what came. Returns the items moved (>= 0), -EPIPE
 * when the link failed, -EBADMSG when the channels failed (pc->err): a message or bulk
 * transfer the end here refused with another error than "not now" is counted in
 * pc->dropped and fails them (never a silent loss); what comes for an end here that
 * has closed is not handed on: counted in pc->peer_closed. */
int part_chans_poll(struct part_chans *pc);

/* True when the peer of every channel carried here has opened its end (the device's
 * process serves them: the device's server then tells the host's end, which serves
 * them from then on, so a host's send is taken only once the device can answer). */
bool part_chans_peers_up(struct part_chans *pc);

/* At the end of a run: send across what was taken here and hand on what came, until
 * nothing has moved for a few milliseconds (a bounded grace: the manager may still be
 * taking the last messages of a process that ended). */
void part_chans_drain(struct part_chans *pc);

/* Stop the manager (its ends close: the local peers see EPIPE) and free what is held,
 * counting it: stop_unhanded (came, not handed on), untaken (handed on, never
 * taken here), stop_unsent (taken, not sent). */
void part_chans_stop(struct part_chans *pc);

#endif
