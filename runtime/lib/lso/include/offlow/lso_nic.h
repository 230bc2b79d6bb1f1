/* The device's side of the send port (lso_port.h): cut each send whose descriptor
 * the port's source delivered, moving its payload out of the send buffer by PIO (the
 * core copies it, checksumming on the way) or by DMA (the device's copy engine moves a
 * chunk of packets' payloads while the core writes the next chunk's headers), and post
 * its completion once its last packet has left. The segmentation element's table.
 *
 * With DMA, packets are built in two chunks of OFL_LSO_CHUNK buffers owned here: while
 * the element hands one chunk's packets on (MAKE), the engine fills the other; PIO
 * builds each packet in one buffer, PLACE in the send buffer itself. A packet
 * ofl_lso_nic_next returns is valid until the next call. */
#ifndef OFL_LSO_NIC_H
#define OFL_LSO_NIC_H

#include <stdint.h>

#include "offlow/copy.h"
#include "offlow/lso.h"
#include "offlow/lso_port.h"
#include "offlow/pkt.h"

struct ofl_args;

/* How payloads move: the core copies them into the device's packet buffers (PIO), the
 * copy engine does (DMA), DMA for payloads of at least dma_min bytes and PIO below
 * (AUTO: the crossover `offlow bench lso` measures), or they stay in the send buffer and
 * each packet's headers are written in place before its payload (PLACE: sends the host
 * left headroom for, OFL_LSO_HEADROOM; others by PIO). */
enum { OFL_LSO_PIO = 0, OFL_LSO_DMA = 1, OFL_LSO_AUTO = 2, OFL_LSO_PLACE = 3 };

#define OFL_LSO_CHUNK OFL_CE_MAX_SEGS

struct ofl_lso_nic_opts {
    const char *path;   /* the port file */
    uint32_t mtu;       /* the link's IP MTU: 68..9216 */
    int move;           /* OFL_LSO_PIO / DMA / AUTO / PLACE */
    uint32_t dma_min;   /* AUTO: the smallest payload the engine moves */
    int dma_cpu;        /* the copy engine thread's CPU, -1 any */
};

/* A chunk of packets built together. */
struct ofl_lso_chunk {
    struct ofl_ce_job job;          /* the payloads the engine moves (DMA) */
    uint8_t *buf;                   /* OFL_LSO_CHUNK frames of frame_cap bytes */
    uint32_t n, i;                  /* packets built, packets handed out */
    uint32_t len[OFL_LSO_CHUNK];
    uint8_t kind[OFL_LSO_CHUNK];
    uint8_t dma[OFL_LSO_CHUNK];     /* its payload is the engine's to move */
    int ready;                      /* every payload landed and sealed */
};

struct ofl_lso_nic {
    struct ofl_lso_port p;
    struct ofl_ring done;           /* the completion FIFO (producer) */
    struct ofl_lso_limits lim;      /* the link: mtu; frame_max the buffers' size */
    uint32_t frame_cap;
    int move;
    uint32_t dma_min;
    struct ofl_ce ce;               /* the copy engine (DMA and AUTO) */
    struct ofl_lso_cut cut;         /* the send being cut */
    int active;                     /* a send is being cut */
    struct ofl_lso_chunk ch[2];
    unsigned cur;                   /* the chunk being handed out */
    uint8_t *bufs;
    /* counters */
    uint64_t sends, refused, packets, bytes, pio_bytes, dma_bytes, place_bytes, dma_jobs, done_lost;
};

/* Attach to the port at o->path as its device side: the completion FIFO, the send
 * buffer, packet buffers for the link's MTU, a copy engine thread unless PIO. Records
 * this process as the port's device (the host watches it). Returns 0, or -EINVAL / a
 * negative errno with a message in `errbuf` (256 bytes). */
int ofl_lso_nic_open(struct ofl_lso_nic **n, const struct ofl_lso_nic_opts *o, char *errbuf);

/* The same from table options NAME.path=, NAME.mtu= (1500), NAME.move=pio|dma|auto|
 * place (pio), NAME.dma_min= (bytes, 1024), NAME.dma_cpu= (-1); says what is wrong
 * (ofl_start_failf). */
int ofl_lso_nic_open_opts(struct ofl_lso_nic **n, const struct ofl_args *a, const char *name);

/* Source kind "lso" (gen.h's struct ofl_src_kind): ofl_lso_src_open on the port at the
 * source's option NAME.port=. */
int ofl_lso_src_open_opts(struct ofl_src **s, const struct ofl_args *a, const char *name,
                          const struct ofl_src_opts *o, char *errbuf);

/* Stop the engine, unmap, free (NULL is fine). */
void ofl_lso_nic_close(struct ofl_lso_nic *n);

/* Start cutting the send of descriptor `desc` (`dlen` bytes, as the source delivered
 * it), its packets at most `frame_max` bytes (the program's mtu). A descriptor
 * lso.h refuses is completed at once with its reason, which is returned (the send has
 * no packets); else 0. */
int ofl_lso_nic_begin(struct ofl_lso_nic *n, const uint8_t *desc, uint32_t dlen,
                      uint32_t frame_max);

/* The next packet of the send: 1 with it in *out (valid until the next call) and its
 * message kind in *kind; 0 when the send is done (its completion posted); a negative
 * errno when the copy engine failed. */
int ofl_lso_nic_next(struct ofl_lso_nic *n, struct ofl_pkt *out, unsigned *kind);

#endif
