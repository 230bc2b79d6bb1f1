/* What both sides of `offlow bench router` share (bench_lpm.c, the offlow side, and
 * bench_dpdk_lpm.c, DPDK's tables beside offlow's): the packed route and address
 * files, offlow's lookups over the addresses, the calibration of the timed passes and
 * the JSON lists. Compiled into each program with that program's flags, so that both
 * run the same code for offlow's lookups. Failures end the program with a message. */
#ifndef OFL_LPM_BENCH_H
#define OFL_LPM_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "offlow/lpm4.h"
#include "offlow/lpm6.h"
#include "offlow/routes.h"

/* Addresses per lookup call: a compile-time constant (rte_lpm_lookup_bulk asks for
 * one); address files hold a multiple of it. */
#define LPM_BURST 64
#define LPM_MAX_REPS 64
#define LPM_MAX_FILES 4

/* Print a JSON list of n doubles. */
void lpm_print_list(const double *v, int n);

/* AnonHugePages of this process, in kB (-1 when unknown). */
long lpm_anon_huge_kb(void);

/* The routes of a packed file: IPv4 8-byte records (u32 address in host order, u16
 * hop, u8 length, u8 pad; little endian) into *r4, or IPv6 20-byte records (16
 * address bytes in network order, u16 hop, u8 length, u8 pad) into *r6 (calloc'd with
 * a spare entry; the other pointer NULL); their count in *n and the hop of the (last)
 * /0 route in *def_hop (0 without one). Exits with status 1 on a file that is not a
 * whole number of records. */
void lpm_read_routes(const char *path, int family, struct ofl_route4 **r4,
                     struct ofl_route6 **r6, size_t *n, uint16_t *def_hop);

/* The addresses of the argument NAME=ADDRS (IPv4: u32 host order; IPv6: 16 bytes
 * network order), malloc'd; their count in *n, NAME in *name (the argument is cut at
 * '='). Exits with status 2, naming `prog`, when the argument has no '=' or the count
 * is not a positive multiple of LPM_BURST. */
void *lpm_read_addrs(char *arg, int family, const char *prog, char **name, size_t *n);

/* offlow's lookups: one by one ("offlow scalar"), the batched scalar path ("offlow
 * batched": ofl_lpm4_lookup_batch_at(OFL_SIMD_SCALAR), ofl_lpm6_lookup_batch) and, for
 * IPv4 only, the batched path the table chose ("offlow vector": ofl_lpm4_lookup_batch,
 * t->simd from the CPU and OFFLOW_SIMD). */
enum lpm_ofl_kind { LPM_OFL_SCALAR, LPM_OFL_BATCHED, LPM_OFL_VECTOR };

/* The lookups of a family: 3 for IPv4, 2 for IPv6 (the first of enum lpm_ofl_kind). */
int lpm_ofl_kinds(int family);

/* The name of a lookup in the JSON ("offlow scalar", ...). */
const char *lpm_ofl_name(enum lpm_ofl_kind k);

/* One timed pass of offlow's lookup `k` (o4 for IPv4, else o6) over n addresses,
 * LPM_BURST per call; the answers summed. */
uint64_t lpm_ofl_pass(const struct ofl_lpm4 *o4, const struct ofl_lpm6 *o6, const void *a,
                      size_t n, enum lpm_ofl_kind k);

/* offlow's answer for each of the n addresses into hops (the untimed pass). */
void lpm_ofl_answers(const struct ofl_lpm4 *o4, const struct ofl_lpm6 *o6, const void *a,
                     size_t n, enum lpm_ofl_kind k, uint16_t *hops);

/* Write n hops to OUTDIR/PREFIX-LOOKUP-NAME.u16, blanks in LOOKUP written as '_'. */
void lpm_write_hops(const char *outdir, const char *prefix, const char *lookup,
                    const char *name, const uint16_t *hops, size_t n);

/* Passes per timed repetition: as many as take min_time, from a warm-up pass that
 * took t seconds (1 to 100,000). */
unsigned lpm_passes(double t, double min_time);

#endif
