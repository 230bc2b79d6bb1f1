/* The element body macros (EMIT, SEND, DROP, DROP_WHY, CONSUME, FAIL, their batch
 * forms, MAKE): what a body decides, as bits of its mask `ofl_mask_`. The same in every
 * target's generated code: gen.h (processes) and bpf.h (XDP) include it. */
#ifndef OFL_BODY_H
#define OFL_BODY_H

/* Set in the mask when a body chose explicitly (EMIT or DROP). */
#define OFL_DECIDED (1u << 31)
/* Emit the packet on output `p` and leave the body. */
#define EMIT(p) do { *ofl_mask_ |= OFL_DECIDED | (1u << OFL_PORT_##p); return; } while (0)
/* Also send the packet out on `p` (a copy when several ports are chosen); go on. */
#define SEND(p) (*ofl_mask_ |= (1u << OFL_PORT_##p))
/* Drop the packet (counted at this element) and leave the body. */
#define DROP() do { *ofl_mask_ = OFL_DECIDED; return; } while (0)
/* Set with OFL_DECIDED when a body dropped the packet for a reason it names
 * (DROP_WHY): the reason's number is in the low byte instead of port bits. */
#define OFL_WHY (1u << 29)
/* Drop the packet for reason `r`, one of the element's `drops` (counted at this
 * element, per reason), and leave the body. */
#define DROP_WHY(r) do { *ofl_mask_ = OFL_DECIDED | OFL_WHY | OFL_WHY_##r; return; } while (0)
/* Set with OFL_DECIDED when a body used the packet up (CONSUME); output port bits
 * stay below OFL_WHY (the compiler allows at most 29 outputs: MAX_OUTPUTS). */
#define OFL_CONSUMED (1u << 30)
/* The packet ends here on purpose, its work done (a reply that only updated a
 * table, say): counted as consumed at this element, not as a drop; leave the body. */
#define CONSUME() do { *ofl_mask_ = OFL_DECIDED | OFL_CONSUMED; return; } while (0)

/* Fail the element's core: the run ends with one error naming the element, its segment
 * and core and the text (printf's format and its arguments: FAIL("no room for %u", n)),
 * the core's rings broken as for any failed core. The packet is dropped (counted at this
 * element under its reason `failed`, which the compiler adds to an element that FAILs)
 * and the body left; no further packet of the core runs, and those it held are dropped
 * and counted there too (the generated loops: ctx->fails). Only where the target's
 * generated code has OFL_FAIL_ (processes: gen.h). */
#define FAIL(...)                                                                      \
    do {                                                                               \
        OFL_FAIL_(__VA_ARGS__);                                                        \
        *ofl_mask_ = OFL_DECIDED | OFL_WHY | OFL_WHY_failed;                           \
        return;                                                                        \
    } while (0)

/* In a batch body (Element.batch_body, over packets 0..n-1): packet `i`'s outcome,
 * as EMIT, DROP, DROP_WHY and CONSUME give a packet's; the body goes on (to the other
 * packets). A packet given none goes out as if the per-packet body fell off its end. */
#define EMIT_AT(i, p) (ofl_masks_[i] |= OFL_DECIDED | (1u << OFL_PORT_##p))
#define DROP_AT(i) (ofl_masks_[i] = OFL_DECIDED)
#define DROP_WHY_AT(i, r) (ofl_masks_[i] = OFL_DECIDED | OFL_WHY | OFL_WHY_##r)
#define CONSUME_AT(i) (ofl_masks_[i] = OFL_DECIDED | OFL_CONSUMED)
/* FAIL for packet `i` (dropped, reason `failed`) in a batch body; the body goes on
 * (return if it should not decide the other packets), but the packets after the first
 * it FAILs are held whatever it decides (dropped unrun, counted as FAIL's). */
#define FAIL_AT(i, ...) \
    (OFL_FAIL_(__VA_ARGS__), ofl_masks_[i] = OFL_DECIDED | OFL_WHY | OFL_WHY_failed)

/* Send a packet the body built, `p` (a struct ofl_pkt *: data, len, cap, ts_ns), out
 * on port `port` now, with a copy of the packet's state as it is; go on. What follows
 * takes its own copy before MAKE returns, so the body may reuse the bytes at once.
 * Counted as made at this element (one send cut into many packets: MAKE each piece,
 * then CONSUME() the send); one longer than the mtu or its cap goes no further
 * (dropped and counted: made_too_long). */
#define MAKE(port, p) OFL_MAKE_(ctx, OFL_PORT_##port, (p), state)

#endif
