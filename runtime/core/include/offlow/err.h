/* Error codes and their text.
 *
 * Runtime functions report errors as negative errno values (-EPIPE, -EINVAL, ...).
 * Packet parsers add their own reasons, negative and below -4096 so they never
 * collide with errno values; so do the libraries beside the core (runtime/lib), each
 * with its own text function. */
#ifndef OFL_ERR_H
#define OFL_ERR_H

/* Reasons a packet parser rejects a packet (returned as negative values). */
enum ofl_pkt_err {
    OFL_ETRUNC = -5001,    /* packet shorter than its headers say */
    OFL_EBADHDR = -5002,   /* a header field has an impossible value */
    OFL_ECSUM = -5003,     /* checksum mismatch */
    OFL_EVERSION = -5004,  /* unknown protocol version */
    OFL_EUNSUPP = -5005,   /* protocol or option the parser does not handle */
    OFL_ELENGTH = -5006,   /* a length field runs past the packet that holds it */
};

/* Why a core stopped with an error of offlow's own (a core's `err`: gen.h), besides
 * errno values and the sentinels of queue.h, src.h and ring.h. Not a packet error: no
 * parser returns these, so they are an enum of their own beside ofl_pkt_err. */
enum ofl_core_err {
    OFL_EFAIL = -5100,     /* an element's body failed the core (FAIL, FAIL_AT: body.h);
                              the core's text says why */
};

/* Text for `err`: a negative errno value, an OFL_E* reason or a runtime sentinel such
 * as OFL_Q_DONE ("unknown error" for others: a library's own codes have their own
 * function, such as mcproto.h's ofl_mc_strerror). Never NULL; the string is static
 * and thread-safe. */
const char *ofl_strerror(int err);

#endif
