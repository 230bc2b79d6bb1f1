/* What the two ends of a remote device's run share (docs/remote.md): the host's
 * stand-in for the device (remote_host.c) and the device's server (remote_serve.c).
 * Both hold a window of the program's layout and carry the rings that cross between
 * them over one authenticated link (runtime/lib/remote), with the window header's
 * abort, stop, drained and stats_req words and the run's control messages beside
 * them. */
#ifndef OFL_REMOTE_PART_H
#define OFL_REMOTE_PART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "offlow/remote_auth.h"
#include "offlow/remote_bridge.h"
#include "offlow/remote_link.h"
#include "offlow/window.h"
#include "remote_chan.h"

/* The run's control messages (the bridge's own kinds are below these). */
enum {
    PART_SETUP = OFL_LINK_KIND_USER + 8,  /* host: what to run (remote_setup.h) */
    PART_EXE,       /* host: the next bytes of the device's executable */
    PART_READY,     /* device: window made, rings bridged: entries may flow */
    PART_FLAGS,     /* either: the header's abort, stop, drained and stats_req words */
    PART_PEER,      /* host: a local peer's liveness pipe closed (index; ~0: the runner) */
    PART_SIGNAL,    /* host: deliver this signal to the device process (a clean stop) */
    PART_DONE,      /* device: its exit status; the stats file it wrote */
    PART_FAIL,      /* device: the run could not start there (why) */
    PART_LIVE,      /* device: its process's live stats (live.h), as it last wrote them */
    PART_CHANS,     /* host: the ids of the channels the device serves (u32 each) */
    PART_CHANS_UP,  /* device: its process serves them: the host's end may take messages */
    PART_DROPS,     /* device: what its end could not deliver by the run's end (part_drops) */
};

#define PART_LIFELINE 0xffffffffu  /* PART_PEER's index for the runner's lifeline */
#define PART_CHUNK (64u << 10)     /* bytes of executable per PART_EXE */

struct part_flags {
    uint32_t abort, stop, drained, stats_req;
};

/* What one end could not deliver by the run's end (counted drops, docs/remote.md). */
struct part_drops {
    uint64_t entries;        /* ring entries produced on this side, never seen taken
                                there (no credit came back for them) */
    uint64_t unsent;         /* of those, the ones this end never sent (exact: the far
                                end counts the rest, they reached it) */
    uint64_t chan_unhanded;  /* channel messages that came, never handed on here or
                                never taken by the end here */
    uint64_t chan_unsent;    /* channel messages taken here, never sent across */
    uint64_t lost_sends;     /* messages UCX took and could not deliver */
    uint64_t dropped_in;     /* ring entries that came here for a ring broken here (its
                                consumer failed, or this end's bridge broke it): not
                                committed (the bridge's dropped_in) */
    uint64_t untaken;        /* ring entries that came here and were committed, which
                                the local consumer never took and does not count
                                (ofl_bridge_untaken) */
};

/* One end's window, bridge and flag mirror. */
struct part {
    struct ofl_link *link;
    struct ofl_bridge bridge;
    bool bridging;             /* the bridge is set up: its messages go to it */
    struct ofl_window win;
    struct part_flags sent;    /* the words as last sent */
    struct part_flags got;     /* the words as last received */
    uint32_t idle;             /* polls in a row that moved nothing */
    struct part_chans chans;   /* the channels that cross (remote_chan.h) */
    bool chans_on;             /* started: their messages go to them */
};

/* Carry the window's channels `ids[0..n)` (each checked against its region), serving
 * side `side` here (the host's end: B, the device's: A). Returns 0 or a negative
 * errno with the reason in `err`. */
int part_chans(struct part *p, const uint32_t *ids, uint32_t n, int side, char *err,
               size_t errlen);

/* Carry the window's rings that cross: ring i is dirs[i] ('o': the device produces,
 * 'i': it consumes, '-': it crosses nothing); `device`: this is the device's end.
 * The rings lie from OFL_WINDOW_HDR_SIZE on, each after the last (the generated
 * ofl_layout). Returns 0 or a negative errno with the reason in `err`. */
int part_bridge(struct part *p, const char *dirs, uint32_t nrings, bool device, char *err,
                size_t errlen);

/* Send the header words that changed since last sent. Returns 0 or -EPIPE. */
int part_flags_send(struct part *p);

/* Apply a peer's PART_FLAGS: abort and stop are raised here when raised there; on the
 * host's end (!device) the drained count grows by what it grew there, on the device's
 * the live-stats request word becomes the host's. */
void part_flags_take(struct part *p, const struct part_flags *f, bool device);

/* True once the run is aborted (the window header's abort word, raised on either side):
 * its rings will not be finished, so neither end waits for them (ofl_bridge_done). */
bool part_aborted(const struct part *p);

/* Ring entries this end holds that can no longer be delivered once the run ends
 * (ofl_bridge_undelivered; 0 before the bridge is up). */
uint64_t part_undelivered(const struct part *p);

/* End the channels at the run's end (drained, then stopped) and count what this end
 * could not deliver. `ended`: the run ended without finishing its rings (aborted, or
 * its link failed) or the local consumers' process has ended: the entries that came
 * and were never taken here are counted (ofl_bridge_untaken; `consumers_gone` says
 * the latter). */
struct part_drops part_end(struct part *p, bool ended, bool consumers_gone);

/* After a poll that moved `moved` entries: spin while busy, then yield, then nap, the
 * naps growing with the idleness up to 1 ms (an idle run or a serve-device waiting for
 * its next run does not hold a CPU). */
void part_idle(struct part *p, int moved);

/* Take the shared secret from OFFLOW_REMOTE_SECRET into `key` and remove it from the
 * environment (nothing this process starts inherits it). Returns its length (at most
 * OFL_AUTH_SECRET_MAX), 0 when it is not set. */
size_t part_take_secret(uint8_t key[OFL_AUTH_SECRET_MAX]);

/* Call `fn` on SIGINT and SIGTERM, and unblock them (a runner starts its parts with
 * them blocked). */
void part_on_stop(void (*fn)(int));

/* Everything file `path` holds (its size in *len; free() it), or NULL. */
uint8_t *part_read(const char *path, size_t *len);

/* True when `fd` has reached EOF (its writers are gone) or failed. */
bool part_fd_gone(int fd);

#endif
