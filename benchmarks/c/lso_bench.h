/* What both programs of `offlow bench lso` share (bench_lso.c, offlow alone, and
 * bench_dpdk_gso.c, DPDK's rte_gso beside offlow): the sends of a capture, and offlow's
 * segmentation of them as the NIC element runs it: a send port in /dev/shm whose send
 * buffer holds every send's payload, and its device side (lso_nic.h) cutting each
 * send's descriptor into packets built in its own buffers. Compiled into each program
 * with that program's flags. Failures end the program with a message. */
#ifndef OFL_LSO_BENCH_H
#define OFL_LSO_BENCH_H

#include <stdint.h>

#include "offlow/lso.h"
#include "offlow/lso_nic.h"
#include "offlow/lso_port.h"

/* The frames of a capture, each a whole send (template, then payload). */
struct lso_sends {
    uint8_t **frame;
    uint32_t *len;
    uint32_t n;
};

/* Read every frame of the pcap at `path` (libpcap); exits with status 1 on failure. */
void lso_load(const char *path, struct lso_sends *s);

/* offlow's side: the port, its device side, one descriptor per send. */
struct lso_ours {
    struct ofl_lso_host host;
    struct ofl_lso_nic *nic;
    struct ofl_lso_desc *desc;
    uint32_t *dlen;
    uint32_t n;
    char path[96];
};

/* Set up offlow's side for the sends at IP MTU `mtu`: payloads into the port's send
 * buffer with headroom before each (as the host side leaves it), descriptors with the
 * largest MSS the MTU allows and checksums computed or offloaded; payloads move by
 * `move` (OFL_LSO_PIO / DMA / PLACE; the engine on `dma_cpu`). In place, a pass writes
 * packet headers into the send buffer as the device does; later passes cut those bytes
 * again (what the bytes are does not change the work). */
void lso_ours_init(struct lso_ours *o, const struct lso_sends *s, uint32_t mtu, int move,
                   int offload, int dma_cpu);

/* Cut every send once; returns the packets made, adds their frame bytes to *bytes and,
 * when `kinds` is not NULL, counts them per message kind (TCP in 0..4, UDP in 5..9).
 * With `out`, each packet is also handed to out(arg, data, len). */
uint64_t lso_ours_pass(struct lso_ours *o, uint64_t *bytes, uint64_t *kinds,
                       void (*out)(void *arg, const uint8_t *p, uint32_t len), void *arg);

void lso_ours_fini(struct lso_ours *o);

/* CLOCK_MONOTONIC seconds. */
double lso_now(void);

/* Pin this thread to `cpu` (-1: leave it). */
void lso_pin(int cpu);

#endif
