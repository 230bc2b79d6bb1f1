/* The host side of a segment on the xdp target: what the generated xdp.c of a
 * program describes, and the run of it (offlow/targets/xdp.py).
 *
 *   xdp --check OBJ [LOG]        load the object's program (the kernel's verifier runs)
 *                                and print the verifier's log when it is refused (on
 *                                stderr, which the compiler reads), also kept in file LOG
 *   xdp --obj OBJ --window W --stats S --opt ... (the options of every device process)
 *                                run: a network namespace of its own with a veth pair
 *                                (xdp_net.h), the tables built and copied into the
 *                                program's maps (xdp_tables.h), the program attached
 *                                to one end (mode: option xdp.mode, generic or native), the source's frames sent into the other
 *                                end one at a time, each frame XDP_TX sends back written
 *                                to the sink with the timestamp of the frame it came
 *                                from; then the program's counters as the stats file
 *                                (and while it runs, on each request of the window's
 *                                stats_req word, as its live copy: live.h).
 *
 *   ... --opt xdp.iface=IFACE    the program attached to IFACE (an existing interface
 *                                of the caller's namespace) instead, the interface's
 *                                own traffic going through it until a stop or the
 *                                source's duration_ns; counters only, no capture.
 *
 * As in every device process, a failure before the first frame is the run's one error
 * (ofl_start_failf; the verifier refusing the program: its reason, and the path of its
 * log kept beside OBJ, xdp_vlog.h) and a user's option (--user-opt) that its source, sink or tables
 * never read is refused (ofl_args_check_unread; --iface: the source reads only its
 * duration_ns).
 *
 * One frame at a time: after each, the program's counters say whether it was sent
 * back (the sink counted it) or not (dropped or consumed, counted where), so no frame
 * is lost unseen and the output keeps the input's order and timestamps.
 *
 * A segment whose packets go on to segments on other devices (the crossing,
 * offlow/codegen/xsk.py; xdp_cross.h) has the program redirect them to an AF_XDP
 * socket (xdp_xsk.h) with their live fields in XDP metadata: this process maps the
 * run's window, takes each such frame (with --input: before the next frame is sent,
 * stamped with the time of the frame it came from) and pushes it into its queue's
 * ring; option xdp.ring sizes the socket's ring. --init makes the run's window.
 *
 * A segment whose device serves channels (their handlers name its shared arrays) has
 * this process answer them (xdp_chan.h): the handlers run here, on the host CPU, over
 * the arrays' BPF maps mapped into it, while XDP updates them; with --serve it keeps
 * serving after the packets until the session stops it. */
#ifndef OFL_XDP_RUN_H
#define OFL_XDP_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/chan.h"
#include "offlow/gen.h"

/* A table the program looks up: its name (its options' prefix) and its maps' (lpm_bpf.h). */
struct ofl_xdp_table {
    const char *name, *maps;
};

/* A shared array the program keeps in one map value: its name and map, `n` integers
 * of `size` bytes (signed or not), reported in the stats as on every device; `percpu`:
 * the map is a per-CPU array (one copy per possible CPU, reported summed); `mem`:
 * where the channel handlers that name it find it (the map's value, mapped into this
 * process: xdp_chan.h), or NULL when no handler does (always for a per-CPU one). */
struct ofl_xdp_array {
    const char *name, *map;
    unsigned n, size;
    int is_signed, percpu;
    void **mem;
};

/* A shared hash map (offlow/map_bpf.h): its name, its hash map's (whose per-CPU
 * `full` counter is `map`_full), key and value bytes and most entries; its control
 * channel (NULL: none), layout text and value type (offlow/map_ctl.h, xdp_mapctl.h). */
struct ofl_xdp_map {
    const char *name, *map;
    unsigned key_size, value_size, entries;
    const char *ctl_chan, *layout;
    char ctl_type;
};

/* A channel the segment's device serves: its name and handler (generated from the
 * handler's body, as on the NIC: offlow/codegen/c.py). */
struct ofl_xdp_chan {
    const char *name;
    ofl_chan_handler handler;
};

/* A queue from the segment to one on another device (the crossing, xsk.py): its
 * producer ends (one per instance, of the rings from `first_ring` on in the window),
 * how many cores consume it (instance i goes to core i % consumers), enqueue=drop. */
struct ofl_xdp_queue {
    const char *name;
    struct ofl_qout **out;
    unsigned first_ring, instances, consumers;
    int drop_full;
};

/* A compiled xdp segment, as its generated xdp.c describes it. */
struct ofl_xdp_desc {
    const char *segment;             /* the segment's name */
    const char *prog;                /* its XDP program's name in the object */
    const char *source, *sink;       /* its source's and sink's names (sink: NULL if none) */
    unsigned source_el, sink_el;     /* their element indices */
    const char *const *el_names;     /* per element, in counter order */
    unsigned nel;
    const unsigned *why_n;           /* per element: its drop reasons */
    const unsigned *why_base;        /* per element: where its reasons' counters start */
    const char *const *why_names;    /* every reason, by counter - OFL_XDP_COUNTERS * nel */
    uint32_t mtu;
    const struct ofl_xdp_table *lpm4;  /* its IPv4 LPM tables, up to one with name NULL */
    const struct ofl_xdp_table *lpm6;  /* its IPv6 LPM tables, up to one with name NULL */
    const struct ofl_xdp_array *arrays;  /* its shared arrays, up to one with name NULL */
    const struct ofl_xdp_map *maps;      /* its shared hash maps, up to one with name NULL */
    int (*init)(const struct ofl_args *a);  /* --init: make the run's window */
    /* the window's size; where each ring and the channel region are in it */
    size_t (*layout)(size_t *ring_off, size_t *chan_off);
    const struct ofl_ring_spec *rings;      /* every ring of the window */
    /* The crossing to segments on other devices (none: ncross 0, core and up NULL):
     * its queues (up to one with name NULL), each crossing's queue by its code, and
     * its counters in the program's map from cross_base: per crossing, packets sent up
     * then drops by each of the ncross_why reasons `cross_why`. */
    const struct ofl_xdp_queue *queues;
    const unsigned *cross_queue;
    unsigned ncross, cross_base;
    /* the counter of the frames the sink sent back (XDP_TX) that a veth's receive
     * drops (a VLAN TPID with fewer than 20 bytes in all): counted before the sink's
     * `in`, so the replay that sees a frame's `in` knows not to wait for it */
    unsigned veth_drops;
    const char *const *cross_why;
    unsigned ncross_why;
    unsigned nrings;                        /* rings in the window */
    uint32_t xsk_frame;                     /* bytes of each AF_XDP umem frame */
    struct ofl_core *core;                  /* the core that pushes into the queues */
    uint32_t *steer;                        /* its round robin over instances */
    /* take one frame from the AF_XDP socket: its state from the metadata that ends at
     * `meta_end` (`room` bytes of its umem frame in front), then its queue; 0, or
     * -EBADMSG when the metadata is no crossing's */
    int (*up)(struct ofl_pkt *pkt, const uint8_t *meta_end, uint32_t room);
    /* The channels it serves (up to one with name NULL), their handlers' argument and
     * where BULK_REPLY finds the manager (xdp_chan.h). */
    const struct ofl_xdp_chan *chans;
    void *chan_ctx;
    struct ofl_chan_mgr **chan_mgr;
};


/* The program of every generated object that passes each frame on (XDP_PASS): on the
 * peer of the run's veth pair in native mode. */
#define OFL_XDP_PASS "ofl_pass_all"

/* Counters per element in the program's per-CPU map: in, dropped, consumed. */
#define OFL_XDP_COUNTERS 3u

/* main() of a generated xdp.c; returns the exit status. */
int ofl_xdp_main(const struct ofl_xdp_desc *d, int argc, char **argv);

#endif
