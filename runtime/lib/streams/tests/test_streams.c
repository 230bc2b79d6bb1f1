/* Tests of the stream operators' state and the tuple frames at their edges, which the
 * end-to-end tests against the Python references (tests/test_streams.py) reach seldom:
 * options refused at open, a full buffer or side, groups over the limit, late tuples,
 * negative order values, pairs too wide, frames with VLAN tags and IPv4 options,
 * fragments and sizes refused, a write that does not fit, order values and sums at the
 * ends of int64 (no signed overflow: UBSan runs these). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "offlow/streams.h"

/* A tuple frame of n values v[i] = base + i: Ethernet (with `vlan` tags), IPv4 with
 * `opt` bytes of options, UDP to `dport`; `frag`: the MF flag set. */
static uint32_t frame(uint8_t *f, unsigned vlan, unsigned opt, unsigned n, int32_t base,
                      uint16_t dport, int frag)
{
    memset(f, 0, OFL_TUPLE_FRAME_MAX);
    uint32_t o = 12;
    for (unsigned k = 0; k < vlan; k++, o += 4)
        ofl_put_be16(f + o, 0x8100);
    ofl_put_be16(f + o, 0x0800);
    uint8_t *ip = f + o + 2;
    uint32_t ihl = 20 + opt, total = ihl + 8 + 4 * n;
    ip[0] = (uint8_t)(0x40 | ihl / 4);
    ofl_put_be16(ip + 2, (uint16_t)total);
    if (frag) ip[6] = 0x20;
    ip[8] = 64;
    ip[9] = 17;
    for (unsigned k = 0; k < opt; k++) ip[20 + k] = 1;   /* NOPs */
    uint8_t *udp = ip + ihl;
    ofl_put_be16(udp, 40000);
    ofl_put_be16(udp + 2, dport);
    ofl_put_be16(udp + 4, (uint16_t)(8 + 4 * n));
    for (unsigned k = 0; k < n; k++) {
        uint32_t x = (uint32_t)(base + (int32_t)k);
        memcpy(udp + 8 + 4 * k, &x, 4);   /* little-endian hosts (x86, arm64) */
    }
    return (uint32_t)(udp + 8 + 4 * n - f);
}

static void test_tuple_frames(void)
{
    uint8_t f[OFL_TUPLE_FRAME_MAX], g[OFL_TUPLE_FRAME_MAX];
    struct ofl_tuple_view t;
    uint32_t len = frame(f, 2, 8, 5, -2, 7001, 0);
    CHECK(ofl_tuple_parse(f, len, &t) == 0 && t.n == 5 && t.dport == 7001 &&
          t.l3_off == 22 && t.off == 22 + 28 + 8, "two VLAN tags and IPv4 options parse");
    CHECK(ofl_tuple_v(f, &t, 1) == -2 && ofl_tuple_v(f, &t, 5) == 2 &&
          ofl_tuple_attr(f, &t, 77, 0) == 77, "values and ts by attribute");
    CHECK(ofl_tuple_parse(f, len - 1, &t) == OFL_TUPLE_ENOTUDP, "a frame cut short");
    len = frame(f, 0, 0, 3, 0, 7001, 1);
    CHECK(ofl_tuple_parse(f, len, &t) == OFL_TUPLE_ENOTUDP, "a fragment is no tuple");
    len = frame(f, 0, 0, 0, 0, 7001, 0);
    CHECK(ofl_tuple_parse(f, len, &t) == OFL_TUPLE_ESIZE, "an empty payload");
    len = frame(f, 0, 0, 3, 0, 7001, 0);
    ofl_put_be16(f + 14 + 20 + 4, 8 + 10);   /* UDP length: not a multiple of 4 */
    ofl_put_be16(f + 14 + 2, 20 + 8 + 10);
    CHECK(ofl_tuple_parse(f, len, &t) == OFL_TUPLE_ESIZE, "a payload of 10 bytes");
    len = frame(f, 0, 0, 3, 10, 7001, 0);
    CHECK(ofl_tuple_parse(f, len, &t) == 0, "three values");
    int32_t v[2] = { 7, -7 };
    CHECK(ofl_tuple_write(g, 14 + 20 + 8 + 7, f, &t, v, 2) == 0, "a write that does not fit");
    uint32_t glen = ofl_tuple_write(g, sizeof g, f, &t, v, 2);
    struct ofl_tuple_view u;
    CHECK(glen == 14 + 20 + 8 + 8 && ofl_tuple_parse(g, glen, &u) == 0 && u.n == 2 &&
          ofl_tuple_v(g, &u, 2) == -7 && ofl_ipv4_csum_ok(g + 14, 20), "a new frame of two");
}

static void test_bsort(void)
{
    struct ofl_bsort *b;
    uint8_t f[OFL_TUPLE_FRAME_MAX];
    struct ofl_pkt out;
    CHECK(ofl_bsort_open(&b, 4096) == -EINVAL, "slack 4096 refused");
    CHECK(ofl_bsort_open(&b, 0) == 0, "slack 0");
    CHECK(ofl_bsort_push(b, f, 60, 5, 3) == 0 && ofl_bsort_pop(b, &out) == 1 &&
          out.ts_ns == 5, "slack 0 lets each tuple out at once");
    CHECK(ofl_bsort_push(b, f, 60, 6, 3) == 0 && ofl_bsort_push(b, f, 60, 7, 3) == -ENOBUFS,
          "a push into a full buffer without a pop is refused");
    CHECK(ofl_bsort_push(b, f, OFL_TUPLE_FRAME_MAX + 1, 0, 0) == -EMSGSIZE, "a frame too long");
    ofl_bsort_close(b);
    /* the end of a stream: what is held comes out smallest first, equal keys by arrival */
    CHECK(ofl_bsort_open(&b, 5) == 0, "slack 5");
    static const int64_t keys[] = { 9, 2, 7, 2, 5 };
    for (uint64_t i = 0; i < 5; i++) {
        f[0] = (uint8_t)i;
        CHECK(ofl_bsort_push(b, f, 60, 100 + i, keys[i]) == 0 && ofl_bsort_pop(b, &out) == 0,
              "held: the buffer is not full");
    }
    static const uint64_t want[] = { 101, 103, 104, 102, 100 };
    for (int k = 0; k < 5; k++)
        CHECK(ofl_bsort_drain(b, &out) == 1 && out.ts_ns == want[k] &&
              out.data[0] == (uint8_t)(want[k] - 100), "drained in key order, ties by arrival");
    CHECK(ofl_bsort_drain(b, &out) == 0, "nothing left");
    for (uint64_t i = 0; i < 6; i++)   /* every slot came back: the buffer fills again */
        CHECK(ofl_bsort_push(b, f, 60, i, 0) == 0, "refilled after a drain");
    CHECK(ofl_bsort_pop(b, &out) == 1 && out.ts_ns == 0, "full again: pops");
    ofl_bsort_close(b);
}

static void test_aggregate(void)
{
    struct ofl_agg *a;
    struct ofl_agg_out o;
    CHECK(ofl_agg_open(&a, OFL_AGG_SUM, 0, 1, 4) == -EINVAL &&
          ofl_agg_open(&a, OFL_AGG_SUM, 1, 0, 4) == -EINVAL &&
          ofl_agg_open(&a, OFL_AGG_SUM, 1024, 1, 4) == -EINVAL &&
          ofl_agg_open(&a, OFL_AGG_SUM, 2, 1, 0) == -EINVAL &&
          ofl_agg_open(&a, OFL_AGG_SUM, 2, 1, 65537) == -EINVAL,
          "sizes, advances and group counts out of range refused");
    CHECK(ofl_agg_open(&a, OFL_AGG_MAX, 2, 2, 2) == 0, "tumbling windows of 2, two groups");
    CHECK(ofl_agg_add(a, -3, 1, 10) == 0 && ofl_agg_add(a, -3, 2, 20) == 0 &&
          ofl_agg_add(a, -3, 3, 30) == -ENOSPC, "a third group in a window is refused");
    CHECK(ofl_agg_add(a, -4, 1, 99) == -ERANGE, "a late tuple is refused");
    CHECK(ofl_agg_next(a, -2, &o) == 1 && o.start == -4 && o.group == 1 && o.value == 10 &&
          ofl_agg_next(a, -2, &o) == 1 && o.group == 2 && ofl_agg_next(a, -2, &o) == 0,
          "window [-4, -2) done at -2: its two groups, the refused one not in it");
    ofl_agg_close(a);
}

/* The end of a stream: the windows still open come out oldest first, groups first-come,
 * with the last kept tuple's headers and ts; nothing once they are out or none is open. */
static void test_aggregate_drain(void)
{
    struct ofl_agg *a;
    struct ofl_pkt out;
    struct ofl_tuple_view t, o;
    uint8_t f[OFL_TUPLE_FRAME_MAX], g[OFL_TUPLE_FRAME_MAX];
    CHECK(ofl_agg_open(&a, OFL_AGG_MIN, 4, 2, 8) == 0, "windows of 4 every 2");
    CHECK(ofl_agg_drain(a, &out) == 0, "no tuple: nothing at the end");
    uint32_t len = frame(f, 1, 0, 3, 0, 7001, 0), glen = frame(g, 0, 4, 2, 0, 7002, 0);
    CHECK(ofl_tuple_parse(f, len, &t) == 0, "a frame with a VLAN tag");
    CHECK(ofl_agg_add(a, 1, 5, -7) == 0 && ofl_agg_add(a, 3, 9, 4) == 0 &&
          ofl_agg_add(a, 3, 5, 2) == 0, "three tuples at 1 and 3: windows -2, 0 and 2");
    ofl_agg_keep(a, f, &t, 333);
    static const int64_t want[][3] = {   /* start, group, min */
        { -2, 5, -7 }, { 0, 5, -7 }, { 0, 9, 4 }, { 2, 9, 4 }, { 2, 5, 2 } };
    for (int k = 0; k < 5; k++) {
        CHECK(ofl_agg_drain(a, &out) == 1 && out.ts_ns == 333 &&
              ofl_tuple_parse(out.data, out.len, &o) == 0 && o.n == 6 && o.l3_off == 18 &&
              o.dport == 7001 && ofl_tuple_v(out.data, &o, 1) == want[k][1] &&
              ofl_tuple_v(out.data, &o, 3) == want[k][2] &&
              ofl_tuple_v(out.data, &o, 5) == want[k][0] &&
              ofl_tuple_v(out.data, &o, 6) == (want[k][0] < 0 ? -1 : 0),
              "result %d: window %lld, group %lld", k, (long long)want[k][0],
              (long long)want[k][1]);
    }
    CHECK(ofl_agg_drain(a, &out) == 0, "all out");
    CHECK(ofl_tuple_parse(g, glen, &t) == 0 && ofl_agg_add(a, 9, 1, 1) == 0, "a later tuple");
    ofl_agg_keep(a, g, &t, 444);
    CHECK(ofl_agg_drain(a, &out) == 1 && out.ts_ns == 444 &&
          ofl_tuple_parse(out.data, out.len, &o) == 0 && o.l4_off == 14 + 24 &&
          o.dport == 7002, "the last kept headers replace the first");
    ofl_agg_close(a);
    CHECK(ofl_agg_open(&a, OFL_AGG_SUM, 2, 2, 1) == 0 && ofl_agg_add(a, 0, 0, 1) == 0 &&
          ofl_agg_drain(a, &out) == 0, "no tuple kept: nothing made from no headers");
    ofl_agg_close(a);
}

/* The int64 of window w's result (v5 low, v6 high) in a made frame. */
static int64_t start_of(const struct ofl_pkt *out)
{
    struct ofl_tuple_view o;
    if (ofl_tuple_parse(out->data, out->len, &o) != 0 || o.n != 6) return -1;
    return (int64_t)((uint64_t)(uint32_t)ofl_tuple_v(out->data, &o, 5) |
                     (uint64_t)(uint32_t)ofl_tuple_v(out->data, &o, 6) << 32);
}

static void test_aggregate_extremes(void)
{
    struct ofl_agg *a;
    struct ofl_agg_out o;
    struct ofl_pkt out;
    struct ofl_tuple_view t;
    uint8_t f[OFL_TUPLE_FRAME_MAX];
    ofl_tuple_parse(f, frame(f, 0, 0, 1, 0, 7001, 0), &t);
    const int64_t big = 4000000000000000000;   /* three of them pass INT64_MAX */
    CHECK(ofl_agg_open(&a, OFL_AGG_AVG, 10, 10, 1) == 0 && ofl_agg_add(a, 0, 0, big) == 0 &&
          ofl_agg_add(a, 1, 0, big + 2) == 0 && ofl_agg_add(a, 2, 0, big + 4) == 0 &&
          ofl_agg_next(a, 10, &o) == 1 && o.count == 3 && o.value == big + 2,
          "the average of three values summing past INT64_MAX: %lld", (long long)o.value);
    ofl_agg_close(a);
    CHECK(ofl_agg_open(&a, OFL_AGG_SUM, 10, 10, 1) == 0 && ofl_agg_add(a, 0, 0, -big) == 0 &&
          ofl_agg_add(a, 1, 0, -big) == 0 && ofl_agg_add(a, 2, 0, -big) == 0 &&
          ofl_agg_next(a, 10, &o) == 1 && o.value == INT64_MIN,
          "a sum below INT64_MIN is INT64_MIN: %lld", (long long)o.value);
    ofl_agg_close(a);
    /* windows of 100 every 10 holding t = INT64_MAX - 5 start at ...710, ..., ...800 (the
     * multiples of 10 in (t - 100, t]); each ends past INT64_MAX: no t ends one */
    const int64_t t_hi = INT64_MAX - 5, first = INT64_MAX - 97;   /* ...807 - 97 = ...710 */
    CHECK(ofl_agg_open(&a, OFL_AGG_COUNT, 100, 10, 1) == 0 && ofl_agg_add(a, t_hi, 0, 1) == 0 &&
          ofl_agg_next(a, INT64_MAX, &o) == 0, "no window near INT64_MAX is done by a tuple");
    ofl_agg_keep(a, f, &t, 1);
    for (int k = 0; k < 10; k++)
        CHECK(ofl_agg_drain(a, &out) == 1 && start_of(&out) == first + 10 * k,
              "at the end, window %d near INT64_MAX: %lld", k, (long long)start_of(&out));
    CHECK(ofl_agg_drain(a, &out) == 0, "ten windows, no more");
    ofl_agg_close(a);
    /* windows of 5 every 1 at t = INT64_MIN: the one starting there (the others would
     * start below INT64_MIN); every 3: none starts at or below t and at or above INT64_MIN */
    CHECK(ofl_agg_open(&a, OFL_AGG_COUNT, 5, 1, 1) == 0 && ofl_agg_add(a, INT64_MIN, 0, 1) == 0 &&
          ofl_agg_next(a, INT64_MIN + 4, &o) == 0 && ofl_agg_next(a, INT64_MIN + 5, &o) == 1 &&
          o.start == INT64_MIN && o.count == 1 && ofl_agg_next(a, INT64_MIN + 5, &o) == 0,
          "one window at INT64_MIN, done at INT64_MIN + 5");
    ofl_agg_close(a);
    CHECK(ofl_agg_open(&a, OFL_AGG_COUNT, 3, 3, 1) == 0 && ofl_agg_add(a, INT64_MIN, 0, 1) == 0 &&
          ofl_agg_add(a, INT64_MIN + 2, 0, 1) == 0 && ofl_agg_next(a, INT64_MAX, &o) == 1 &&
          o.start == INT64_MIN + 2 && o.count == 1,
          "tumbling windows of 3 from INT64_MIN + 2 (INT64_MIN falls in none)");
    ofl_agg_close(a);
}

static void test_join(void)
{
    struct ofl_join *j;
    int32_t v[OFL_TUPLE_MAX], out[OFL_TUPLE_MAX];
    uint32_t n;
    for (unsigned k = 0; k < OFL_TUPLE_MAX; k++) v[k] = (int32_t)k;
    CHECK(ofl_join_open(&j, -1, 4) == -EINVAL && ofl_join_open(&j, 1, 0) == -EINVAL,
          "a negative window or no room refused");
    CHECK(ofl_join_open(&j, 10, 2) == 0, "window 10, two a side");
    for (int k = 0; k < 2; k++)
        CHECK(ofl_join_begin(j, 0, k, 5, v, 3) == 0 && ofl_join_next(j, out, &n) == 0 &&
              ofl_join_add(j) == 0, "left tuple %d kept", k);
    CHECK(ofl_join_begin(j, 0, 2, 5, v, 3) == 0 && ofl_join_add(j) == -ENOSPC,
          "a third left tuple finds its side full");
    CHECK(ofl_join_begin(j, 0, 1, 5, v, 3) == -ERANGE, "a late left tuple is refused");
    CHECK(ofl_join_begin(j, 1, 11, 5, v + 3, 2) == 0 && ofl_join_next(j, out, &n) == 1 &&
          n == 5 && out[0] == 0 && out[3] == 3 && ofl_join_next(j, out, &n) == 0,
          "a right tuple at 11 forgets the left one at 0 and joins the one at 1, left first");
    CHECK(ofl_join_begin(j, 1, 12, 5, v, OFL_TUPLE_MAX) == 0 && ofl_join_next(j, out, &n) == 0,
          "a pair of more than 128 values is passed over");
    ofl_join_close(j);
    CHECK(ofl_join_open(&j, 10, 2) == 0 && ofl_join_begin(j, 1, INT64_MAX, 5, v, 1) == 0 &&
          ofl_join_add(j) == 0 && ofl_join_begin(j, 0, INT64_MIN, 5, v, 1) == 0 &&
          ofl_join_next(j, out, &n) == 0 && ofl_join_add(j) == 0 &&
          ofl_join_begin(j, 0, INT64_MAX - 10, 5, v, 1) == 0 && ofl_join_next(j, out, &n) == 1 &&
          ofl_join_next(j, out, &n) == 0,
          "INT64_MIN and INT64_MAX are far apart; INT64_MAX - 10 and INT64_MAX within 10");
    ofl_join_close(j);
}

static void test_resample(void)
{
    struct ofl_resample *r;
    uint8_t f[OFL_TUPLE_FRAME_MAX], wide[OFL_TUPLE_FRAME_MAX];
    struct ofl_tuple_view t, w;
    struct ofl_pkt out;
    uint32_t len = frame(f, 0, 0, 2, 100, 7001, 0);
    uint32_t wlen = frame(wide, 0, 0, OFL_TUPLE_MAX - 1, 0, 7001, 0);
    ofl_tuple_parse(f, len, &t);
    CHECK(ofl_tuple_parse(wide, wlen, &w) == 0, "a tuple of 127 values");
    CHECK(ofl_resample_open(&r, 5, 0) == -EINVAL, "no room refused");
    CHECK(ofl_resample_open(&r, 5, 3) == 0, "window 5, three a side");
    CHECK(ofl_resample_left(r, wide, wlen, &w, 0, 0) == -EMSGSIZE,
          "a left tuple with no room for two more values");
    CHECK(ofl_resample_left(r, f, len, &t, 1000, 10) == 0 &&
          ofl_resample_left(r, f, len, &t, 2000, 10) == 0 &&
          ofl_resample_left(r, f, len, &t, 3000, 11) == 0 &&
          ofl_resample_left(r, f, len, &t, 4000, 11) == -ENOSPC,
          "three left tuples wait, no fourth");
    CHECK(ofl_resample_right(r, 6, 4) == 0 && ofl_resample_right(r, 14, 9) == 0 &&
          ofl_resample_right(r, 13, 1) == -ERANGE && ofl_resample_next(r, &out) == 0,
          "rights at 6 and 14 (a late one refused): no left done yet");
    CHECK(ofl_resample_right(r, 16, 0) == 0 && ofl_resample_next(r, &out) == 1 &&
          out.ts_ns == 1000 && ofl_resample_next(r, &out) == 1 && out.ts_ns == 2000 &&
          ofl_resample_next(r, &out) == 0,
          "a right at 16 finishes the two at 10, in order, not the one at 11");
    struct ofl_tuple_view o;
    CHECK(ofl_tuple_parse(out.data, out.len, &o) == 0 && o.n == 4 &&
          ofl_tuple_v(out.data, &o, 1) == 100 && ofl_tuple_v(out.data, &o, 3) == 2 &&
          ofl_tuple_v(out.data, &o, 4) == 6, "left values, then 2 rights near (6, 14), avg 6");
    CHECK(ofl_resample_right(r, 17, 0) == -ENOSPC,
          "the rights at 6 and up are still near the left at 11: no room for a fourth");
    CHECK(ofl_resample_left(r, f, len, &t, 5000, 30) == 0 && ofl_resample_next(r, &out) == 0,
          "lefts at 11 and 30 wait for the right stream");
    CHECK(ofl_resample_drain(r, &out) == 1 && out.ts_ns == 3000 &&
          ofl_tuple_parse(out.data, out.len, &o) == 0 && o.n == 4 &&
          ofl_tuple_v(out.data, &o, 3) == 3 && ofl_tuple_v(out.data, &o, 4) == 4,
          "at the end the left at 11 comes out with the rights at 6, 14 and 16 (4, 9, 0: avg 4)");
    CHECK(ofl_resample_drain(r, &out) == 0 && ofl_resample_drain(r, &out) == 0,
          "the left at 30 has no right near: it ends there");
    ofl_resample_close(r);
    CHECK(ofl_resample_open(&r, 5, 3) == 0 && ofl_resample_left(r, f, len, &t, 1, 1) == 0 &&
          ofl_resample_drain(r, &out) == 0, "no right tuple at all: nothing at the end");
    ofl_resample_close(r);
    const int64_t big = 4000000000000000000;   /* three of them pass INT64_MAX */
    CHECK(ofl_resample_open(&r, 5, 3) == 0 &&
          ofl_resample_left(r, f, len, &t, 7, INT64_MAX - 5) == 0 &&
          ofl_resample_right(r, INT64_MAX - 9, big) == 0 &&
          ofl_resample_right(r, INT64_MAX - 2, big + 2) == 0 &&
          ofl_resample_right(r, INT64_MAX, big + 4) == 0 && ofl_resample_next(r, &out) == 0,
          "near INT64_MAX no right passes the left's window's end: it waits");
    CHECK(ofl_resample_drain(r, &out) == 1 && out.ts_ns == 7 &&
          ofl_tuple_parse(out.data, out.len, &o) == 0 && ofl_tuple_v(out.data, &o, 3) == 3 &&
          ofl_tuple_v(out.data, &o, 4) == (int32_t)(big + 2),
          "at the end: the three rights near it, their average's low 32 bits");
    ofl_resample_close(r);
    CHECK(ofl_resample_open(&r, 5, 3) == 0 && ofl_resample_right(r, INT64_MAX, 1) == 0 &&
          ofl_resample_left(r, f, len, &t, 8, INT64_MIN) == 0 && ofl_resample_next(r, &out) == 0 &&
          ofl_resample_drain(r, &out) == 0,
          "a right at INT64_MAX is not near a left at INT64_MIN");
    ofl_resample_close(r);
}

int main(void)
{
    test_tuple_frames();
    test_bsort();
    test_aggregate();
    test_aggregate_drain();
    test_aggregate_extremes();
    test_join();
    test_resample();
    return CHECK_DONE();
}
