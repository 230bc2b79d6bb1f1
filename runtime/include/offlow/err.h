/* Error codes and their text.
 *
 * Runtime functions report errors as negative errno values (-EPIPE, -EINVAL, ...).
 * Packet parsers add their own reasons, negative and below -4096 so they never
 * collide with errno values. */
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

/* Text for `err`: a negative errno value, an OFL_E* reason, a memcached parser's
 * OFL_MC_E* (mcproto.h) or a runtime sentinel such as OFL_Q_DONE. Never NULL; the
 * string is static and thread-safe. */
const char *ofl_strerror(int err);

#endif
