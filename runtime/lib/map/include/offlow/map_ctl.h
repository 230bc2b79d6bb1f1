/* Control messages of a shared hash map (offlow ctl RUN map NAME ...; ctl.h has the
 * channel and the reply). The map belongs to one core and has no locks, so the channel
 * manager does not touch it: ofl_map_ctl_call posts the request in the map's mailbox
 * and the owning core runs it between two turns (ofl_map_ctl_serve), so a request and
 * the core's own lookups and updates never overlap; once the core's loop has ended
 * (ofl_map_ctl_owner_done) the manager runs requests itself. Messages (little-endian,
 * KEY: the packed key struct's bytes, VALUE: the value's):
 *
 *   'i'              info: struct ofl_ctl_info, kind OFL_CTL_MAP, value type ('u', 'i',
 *                    or 'r' for a record of fields) and size,
 *                    length = keys held, updates; then u32 entries, u32 key size,
 *                    u64 full
 *   'k' u16 offset   the layout text from `offset` (a reply shorter than the most a
 *                    reply holds ends it): "FIELD:TYPE,...;VALUETYPE", VALUETYPE a
 *                    record's "FIELD:TYPE,..." for a record value
 *   'g' KEY          the value, or -ENOENT
 *   's' KEY VALUE    store (insert or replace): 0, or -ENOSPC when the key is new and
 *                    the map is full (counted `full`, as a core's refused update);
 *                    -ENOMEM (xdp) when the kernel could not allocate memory for it
 *   'd' KEY          delete: 0, or -ENOENT
 *   'n' u32 slot     the first key at a slot >= `slot`: u32 its slot, KEY, VALUE; or
 *                    -ENOENT past the last (a walk: start at 0, go on at slot + 1; a
 *                    map without slots numbers its keys in its own walk's order)
 *
 * A request of the wrong size is refused (-EINVAL) and changes nothing. A map whose
 * key and value take more than OFL_MAP_CTL_KV_MAX bytes has requests or replies
 * longer than one message: its channel stages them (ctl_stage.h; the _out functions
 * here take a request of any length and keep a long reply), and its owning core runs
 * a staged request whole between two turns, as any other. */
#ifndef OFL_MAP_CTL_H
#define OFL_MAP_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/ctl.h"
#include "offlow/map.h"

#define OFL_CTL_MAP 4
#define OFL_CTL_MAP_LAYOUT 'k'
#define OFL_CTL_MAP_DEL 'd'
#define OFL_CTL_MAP_NEXT 'n'

/* The largest key + value whose requests and replies all fit one message (a walk's
 * reply: status, slot, key and value in OFL_CTL_MSG_MAX bytes). */
#define OFL_MAP_CTL_KV_MAX (OFL_CTL_MSG_MAX - 8)
/* The longest value the messages take (a map's own are at most OFL_MAP_VALUE_MAX; other
 * hash maps served through struct ofl_map_ctl_ops may hold longer ones). */
#define OFL_MAP_CTL_VALUE_MAX 256u
/* The longest request or reply payload of a map of `ks`-byte keys and `vs`-byte values
 * (a walk's reply: slot, key, value): its staging buffers' size (ctl_stage.h). */
#define OFL_MAP_CTL_STAGE(ks, vs) (4u + (ks) + (vs))

/* A map's side of the messages, for any hash map (a struct ofl_map, or the xdp
 * target's BPF hash map through its fd): its sizes, layout text and value type ('u' or
 * 'i'), the changes made through control (`updates`, counted here), and what answers
 * each request on `self`. */
struct ofl_map_ctl_ops {
    void *self;
    uint32_t key_size, value_size, entries;
    const char *layout;
    char type;
    uint64_t *updates;
    /* keys held now, and the updates refused because the map was full */
    void (*counts)(void *self, uint32_t *count, uint64_t *full);
    int (*get)(void *self, const void *key, void *value);        /* 0 or -ENOENT */
    /* 0, -ENOSPC (the map full: counted), or another negative errno (not counted) */
    int (*set)(void *self, const void *key, const void *value);
    int (*del)(void *self, const void *key);                     /* 0 or -ENOENT */
    /* the first entry at a position >= *at (*at set to its position), or -ENOENT */
    int (*next)(void *self, uint32_t *at, void *key, void *value);
};

/* Run message `msg` (`len` bytes) on the map `o` answers for (a reply too long for one
 * message is refused: -EMSGSIZE). */
void ofl_map_ctl_msg(const struct ofl_map_ctl_ops *o, const uint8_t *msg, size_t len,
                     struct ofl_ctl_reply *r);

/* ofl_map_ctl_msg of a request of any length (a staged one), a reply too long for one
 * message kept in `out` (ofl_ctl_ok_out; `out` may be NULL). Keys longer than
 * OFL_MAP_KEY_MAX and values longer than OFL_MAP_CTL_VALUE_MAX are refused: -EMSGSIZE. */
void ofl_map_ctl_msg_out(const struct ofl_map_ctl_ops *o, const uint8_t *msg, size_t len,
                         struct ofl_ctl_out *out, struct ofl_ctl_reply *r);

/* Run message `msg` (`len` bytes) on map `m` now, from the thread that owns it. */
void ofl_map_ctl(struct ofl_map *m, const uint8_t *msg, size_t len, struct ofl_ctl_reply *r);

/* ofl_map_ctl with ofl_map_ctl_msg_out's `out`. */
void ofl_map_ctl_out(struct ofl_map *m, const uint8_t *msg, size_t len,
                     struct ofl_ctl_out *out, struct ofl_ctl_reply *r);

/* The channel manager's side: hand message `msg` to the map's owner and wait for its
 * reply (bounded spin, then yields and naps); run it here once the owner is done. */
void ofl_map_ctl_call(struct ofl_map *m, const uint8_t *msg, size_t len,
                      struct ofl_ctl_reply *r);

/* ofl_map_ctl_call with ofl_map_ctl_msg_out's `out` (written by the owner, read after
 * the reply); `msg` stays the caller's until the reply (it is not copied). */
void ofl_map_ctl_call_out(struct ofl_map *m, const uint8_t *msg, size_t len,
                          struct ofl_ctl_out *out, struct ofl_ctl_reply *r);

/* The owning core, between turns: run a posted request, if any (one load when none). */
void ofl_map_ctl_serve(struct ofl_map *m);

/* The owning core's loop has ended: later requests run on the manager's thread (a
 * request posted before is served here). */
void ofl_map_ctl_owner_done(struct ofl_map *m);

#endif
