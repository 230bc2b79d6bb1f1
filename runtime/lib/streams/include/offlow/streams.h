/* The order-sensitive stream operators' state (Aurora's BSort, Aggregate, Join,
 * Resample; the active-NIC seed's Table 2): each is a table object of one element on
 * one core, fed tuples (tuple.h) in arrival order; what each assumes of that order is
 * stated at its type and in docs/streams.md. The elements (offlow/elements/streams.py)
 * call these; the operators copy what they keep, so a packet may go once a call
 * returns. */
#ifndef OFFLOW_STREAMS_H
#define OFFLOW_STREAMS_H

#include <stdint.h>

#include "offlow/pkt.h"
#include "offlow/tuple.h"

struct ofl_args;

/* ---- BSort: approximate sort on an attribute with slack n ------------------------
 * A buffer of n + 1 tuples: each arrival is put in, and once n + 1 are held the one
 * with the smallest key (the earliest arrived among equal keys) goes out. A tuple at
 * most n places out of order comes out in order; one later comes out late (never
 * dropped). At a finite stream's end ofl_bsort_drain lets the rest out, in order. */
struct ofl_bsort;

/* A sorter with slack `slack` (0..4095): 0 and *b set, -EINVAL, -ENOMEM. */
int ofl_bsort_open(struct ofl_bsort **b, uint32_t slack);
/* Frees it (NULL is fine). */
void ofl_bsort_close(struct ofl_bsort *b);
/* Puts in the frame `data` (`len` bytes, at most OFL_TUPLE_FRAME_MAX: else -EMSGSIZE)
 * with timestamp `ts` and sort key `key`; 0 */
int ofl_bsort_push(struct ofl_bsort *b, const uint8_t *data, uint32_t len, uint64_t ts,
                   int64_t key);
/* When the buffer holds slack + 1 tuples, takes out the smallest into `out` (its data
 * valid until the next push) and returns 1; else 0. */
int ofl_bsort_pop(struct ofl_bsort *b, struct ofl_pkt *out);
/* At the end of a stream: takes out the smallest tuple still held, however few, into
 * `out` (its data valid until the next call) and returns 1; 0 when none is left. */
int ofl_bsort_drain(struct ofl_bsort *b, struct ofl_pkt *out);

/* ---- Aggregate: sliding windows by size and advance, group-by --------------------
 * Windows over the order attribute t: window w holds the tuples with
 * w*advance <= t < w*advance + size (w any integer). Assumes t never decreases (the
 * element drops a tuple with a smaller t than one before as late). Window w is done
 * when a tuple with t >= its end arrives; it gives one result per group seen in it, in
 * the order the groups first came; a window no tuple fell in gives none. At a finite
 * stream's end ofl_agg_drain gives the windows still open, made with the headers and
 * ts of the last tuple kept (ofl_agg_keep). Every t is valid: a window whose end lies
 * past INT64_MAX is given only at the end, windows that would start below INT64_MIN
 * do not exist, and a sum beyond int64 is the nearest int64 (an average is exact). */
enum ofl_agg_fn { OFL_AGG_COUNT, OFL_AGG_SUM, OFL_AGG_AVG, OFL_AGG_MIN, OFL_AGG_MAX };

/* One result: the window's start (w * advance), the group, how many tuples, and the
 * function over their values (avg: the sum divided by the count, rounded toward 0). */
struct ofl_agg_out {
    int64_t start, group, count, value;
};
struct ofl_agg;

/* An aggregate of `fn` with windows of `size` and `advance` (both > 0, at most 1024
 * windows open at once: size <= 1024 * advance), holding up to `groups` (1..65536)
 * groups per window: 0 and *a set, -EINVAL, -ENOMEM. */
int ofl_agg_open(struct ofl_agg **a, enum ofl_agg_fn fn, int64_t size, int64_t advance,
                 uint32_t groups);
void ofl_agg_close(struct ofl_agg *a);
/* The next result of a window done by a tuple at `t`: 1 and *o set, 0 when there are no
 * more. Call it until 0 before ofl_agg_add(t). */
int ofl_agg_next(struct ofl_agg *a, int64_t t, struct ofl_agg_out *o);
/* Adds `value` of `group` at `t` to every window holding t: 0, -ERANGE (nothing added)
 * when t is below an earlier tuple's (late), -ENOSPC (nothing added) when one of them
 * already holds `groups` other groups. */
int ofl_agg_add(struct ofl_agg *a, int64_t t, int64_t group, int64_t value);
/* Keeps the headers (tv->off bytes of `data`, a parsed tuple frame) and the ts of the
 * tuple just added, for the results ofl_agg_drain makes at the end (each call replaces
 * the last). */
void ofl_agg_keep(struct ofl_agg *a, const uint8_t *data, const struct ofl_tuple_view *tv,
                  uint64_t ts);
/* Writes a result as a tuple frame into `buf` (`cap` bytes) with the headers of `tmpl`
 * (parsed as `tv`): v1 group, v2 count, v3..v4 the value and v5..v6 the start, each
 * int64 low then high. Returns its length, 0 when it does not fit (ofl_tuple_write). */
uint32_t ofl_agg_write(uint8_t *buf, uint32_t cap, const uint8_t *tmpl,
                       const struct ofl_tuple_view *tv, const struct ofl_agg_out *o);
/* At the end of a stream: the next result of a window still open (oldest window first,
 * its groups in first-come order, as ofl_agg_next) as a frame in `out` with the kept
 * headers and ts (valid until the next call): 1, or 0 when none is left. Results are
 * passed over when no tuple was kept. */
int ofl_agg_drain(struct ofl_agg *a, struct ofl_pkt *out);

/* ---- Join: window join of two streams -----------------------------------------------
 * A pair (l, r) of a left and a right tuple joins when their keys are equal and their
 * order attributes differ by at most `size`; it comes out once, when the later of the
 * two arrives: the left values then the right ones. Assumes each side's t never
 * decreases and that the sides arrive interleaved by t (a tuple is kept until the other
 * side passes t + size). */
struct ofl_join;

/* A join with window `size` (>= 0) keeping up to `cap` (1..65536) tuples per side:
 * 0 and *j set, -EINVAL, -ENOMEM. */
int ofl_join_open(struct ofl_join **j, int64_t size, uint32_t cap);
void ofl_join_close(struct ofl_join *j);
/* A tuple of `side` (0 left, 1 right) at `t` with `key` and values v[0..n): forgets the
 * other side's tuples that no later tuple of this side can join and starts the
 * matches; then ofl_join_next gives them. 0, or -ERANGE (nothing begun) when t is
 * below an earlier tuple's of its side (late). */
int ofl_join_begin(struct ofl_join *j, unsigned side, int64_t t, int64_t key,
                   const int32_t *v, uint32_t n);
/* The next match of the tuple begun: 1 and the joined values in out[0..*n) (left then
 * right; a pair of more than OFL_TUPLE_MAX values in all is passed over: the element
 * takes tuples of at most OFL_TUPLE_MAX / 2), 0 when there are no more. */
int ofl_join_next(struct ofl_join *j, int32_t *out, uint32_t *n);
/* Keeps the tuple begun for the other side's later tuples: 0, -ENOSPC when its side
 * holds `cap`. */
int ofl_join_add(struct ofl_join *j);

/* ---- Resample: a left tuple with the average of the right ones near it -------------
 * For each left tuple l, the right tuples r with |r.t - l.t| <= size: when at least one,
 * l comes out with two values added, their count and the average of their values
 * (rounded toward 0); else nothing (a semijoin). l comes out once the right stream has
 * passed l.t + size (a right tuple with a larger t arrives). Assumes each side's t
 * never decreases. At a finite stream's end ofl_resample_drain lets the left tuples
 * still waiting out, with the right ones near them that came. */
struct ofl_resample;

/* A resampler with window `size` (>= 0) keeping up to `cap` (1..65536) tuples per side:
 * 0 and *r set, -EINVAL, -ENOMEM. */
int ofl_resample_open(struct ofl_resample **r, int64_t size, uint32_t cap);
void ofl_resample_close(struct ofl_resample *r);
/* A left tuple: its frame (data, len <= OFL_TUPLE_FRAME_MAX, parsed as tv, at most
 * OFL_TUPLE_MAX - 2 values) at `t`: 0, -ENOSPC when `cap` wait, -EMSGSIZE, -ERANGE
 * when t is below an earlier left tuple's (late). */
int ofl_resample_left(struct ofl_resample *r, const uint8_t *data, uint32_t len,
                      const struct ofl_tuple_view *tv, uint64_t ts, int64_t t);
/* A right tuple at `t` with `value`: 0, -ENOSPC when `cap` are held, -ERANGE when t
 * is below an earlier right tuple's (late). */
int ofl_resample_right(struct ofl_resample *r, int64_t t, int64_t value);
/* The next left tuple done that has a right one near: 1 and *out its frame with the
 * two values added (valid until the next call), 0 when none is done (left tuples with
 * no right one near are passed over: the semijoin). */
int ofl_resample_next(struct ofl_resample *r, struct ofl_pkt *out);
/* At the end of a stream: as ofl_resample_next, for every left tuple still waiting
 * however far the right stream came (oldest first): 1 and *out, 0 when none is left. */
int ofl_resample_drain(struct ofl_resample *r, struct ofl_pkt *out);

/* ---- as table objects (run-time options NAME.KEY=VALUE) --------------------------- */
/* slack= */
int ofl_bsort_open_opts(struct ofl_bsort **b, const struct ofl_args *a, const char *name);
/* fn=count|sum|avg|min|max, size=, advance=, groups= */
int ofl_agg_open_opts(struct ofl_agg **g, const struct ofl_args *a, const char *name);
/* size=, cap= */
int ofl_join_open_opts(struct ofl_join **j, const struct ofl_args *a, const char *name);
/* size=, cap= */
int ofl_resample_open_opts(struct ofl_resample **r, const struct ofl_args *a, const char *name);

#endif
