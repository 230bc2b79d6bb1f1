/* memcached protocol: a zero-copy request parser and response writers.
 *
 * Three framings are understood:
 *   - the binary protocol: a 24-byte header (magic 0x80), then extras, key and
 *     value whose lengths the header gives (extras + key + value = body length);
 *   - the text protocol: a command line ending in "\n" (a "\r" before it is
 *     dropped), and for storage commands (set, add, replace, append, prepend, cas,
 *     and the meta ms) a data block of <bytes> bytes + "\r\n";
 *   - the UDP frame header (8 bytes, big-endian: request id, sequence number,
 *     datagram count, reserved) in front of each datagram's requests.
 *
 * ofl_mc_parse() reads one request from the front of a buffer and fills a struct
 * ofl_mc_req whose keys and values point into that buffer (nothing is copied: the
 * buffer must outlive the views). It returns
 *   > 0  the request is complete and this many bytes make it up;
 *   0    the buffer holds only the start of a request: req->need more bytes at
 *        least (exact for binary requests and text data blocks; 1 while a text
 *        line has no "\n" yet);
 *   < 0  an OFL_MC_E* error. req->len is then how many bytes the bad request
 *        spans (it may be more than the buffer holds: the caller skips them as
 *        they arrive), req->fatal says that the stream cannot be resynchronized
 *        and the connection should be closed after the error reply, and the
 *        request's protocol, command, opcode and opaque are filled as far as
 *        they were read, so that ofl_mc_write_error() can answer.
 *
 * A text storage command's data block is part of the request whatever is wrong
 * with its command line: when the line gives a readable length (the 5th token of
 * set/add/replace/append/prepend/cas, the 3rd of ms), the error's span covers the
 * data block too, so its bytes are skipped and never read as commands (a value
 * that looks like "delete victim" stays a value). memcached 1.6 skips the block
 * only for some errors (too large, and the meta errors after the length); for the
 * others (wrong argument count, a bad number or key) it reads the block as
 * commands, which lets a stored value run commands: offlow answers with the same
 * error line and skips the block. A line whose length token cannot be read (too
 * few tokens, not a number, negative) is skipped alone, as in memcached.
 *
 * Error replies follow memcached 1.6 (what a client of memcached expects):
 * binary: extras + key longer than the body -> UNKNOWN_COMMAND and close; a key
 * over 250 bytes, or extras / key / value that the opcode does not allow -> EINVAL
 * and close; unknown opcode -> UNKNOWN_COMMAND and the body is skipped; a value
 * over the limit -> E2BIG and the body is skipped; a bad magic byte -> close
 * without a reply. Text: unknown command or wrong argument count -> "ERROR"; bad
 * numbers or a long key -> "CLIENT_ERROR bad command line format" (or the
 * command's own text: "CLIENT_ERROR invalid exptime argument", "CLIENT_ERROR
 * invalid numeric delta argument", the meta commands' flag errors, in
 * req->errmsg); a value over the limit -> "SERVER_ERROR object too large for
 * cache"; a data block not followed by "\r\n" -> "CLIENT_ERROR bad data chunk"; a
 * line longer than the limit -> "CLIENT_ERROR line too long" and close. As in
 * memcached, a classic text command whose "noreply" was read gets no reply at
 * all, errors included (a meta command's errors are always answered); extra
 * arguments after "version", "quit" and "mn" are ignored.
 *
 * All functions are pure (no state between calls) and thread-safe. */
#ifndef OFL_MCPROTO_H
#define OFL_MCPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "offlow/err.h"

#define OFL_MC_KEY_MAX 250u                 /* longest key, both protocols */
#define OFL_MC_VALUE_MAX_DEFAULT (1u << 20) /* default limit on a value: 1 MiB */
#define OFL_MC_LINE_MAX_DEFAULT 16384u      /* default limit on a text command line */
#define OFL_MC_HDR_LEN 24u                  /* binary header */
#define OFL_MC_UDP_HDR_LEN 8u               /* UDP frame header */
#define OFL_MC_UDP_DGRAM_MAX 1400u          /* a response datagram, frame header included */
#define OFL_MC_REQ_MAGIC 0x80
#define OFL_MC_RES_MAGIC 0x81

/* Binary opcodes (those this parser knows; every other opcode is "unknown"). */
enum ofl_mc_opcode {
    OFL_MC_OP_GET = 0x00,
    OFL_MC_OP_SET = 0x01,
    OFL_MC_OP_ADD = 0x02,
    OFL_MC_OP_REPLACE = 0x03,
    OFL_MC_OP_DELETE = 0x04,
    OFL_MC_OP_INCREMENT = 0x05,
    OFL_MC_OP_DECREMENT = 0x06,
    OFL_MC_OP_QUIT = 0x07,
    OFL_MC_OP_FLUSH = 0x08,
    OFL_MC_OP_GETQ = 0x09,
    OFL_MC_OP_NOOP = 0x0a,
    OFL_MC_OP_VERSION = 0x0b,
    OFL_MC_OP_GETK = 0x0c,
    OFL_MC_OP_GETKQ = 0x0d,
    OFL_MC_OP_APPEND = 0x0e,
    OFL_MC_OP_PREPEND = 0x0f,
    OFL_MC_OP_STAT = 0x10,
    OFL_MC_OP_SETQ = 0x11,
    OFL_MC_OP_ADDQ = 0x12,
    OFL_MC_OP_REPLACEQ = 0x13,
    OFL_MC_OP_DELETEQ = 0x14,
    OFL_MC_OP_INCREMENTQ = 0x15,
    OFL_MC_OP_DECREMENTQ = 0x16,
    OFL_MC_OP_QUITQ = 0x17,
    OFL_MC_OP_FLUSHQ = 0x18,
    OFL_MC_OP_APPENDQ = 0x19,
    OFL_MC_OP_PREPENDQ = 0x1a,
    OFL_MC_OP_TOUCH = 0x1c,
    OFL_MC_OP_GAT = 0x1d,
    OFL_MC_OP_GATQ = 0x1e,
    OFL_MC_OP_GATK = 0x23,
    OFL_MC_OP_GATKQ = 0x24,
};

/* Binary response status codes. */
enum ofl_mc_status {
    OFL_MC_ST_OK = 0x0000,
    OFL_MC_ST_NOT_FOUND = 0x0001,
    OFL_MC_ST_EXISTS = 0x0002,
    OFL_MC_ST_E2BIG = 0x0003,
    OFL_MC_ST_EINVAL = 0x0004,
    OFL_MC_ST_NOT_STORED = 0x0005,
    OFL_MC_ST_DELTA_BADVAL = 0x0006,
    OFL_MC_ST_UNKNOWN_COMMAND = 0x0081,
    OFL_MC_ST_ENOMEM = 0x0082,
    OFL_MC_ST_ETMPFAIL = 0x0086,
};

/* Parse errors: negative, in the range err.h reserves for them (OFL_ERR_MC_FIRST down
 * to OFL_ERR_MC_LAST, apart from the packet reasons' and the core's), EMAGIC down to
 * EUDP; a new one goes after EUDP. */
enum ofl_mc_err {
    OFL_MC_EMAGIC = -5201,   /* binary: first byte is not 0x80 */
    OFL_MC_EUNKNOWN = -5202, /* unknown opcode / text command, or wrong argument count */
    OFL_MC_EINVAL = -5203,   /* extras/key/value not allowed for the opcode; bad text number */
    OFL_MC_EKEY = -5204,     /* key longer than 250 bytes */
    OFL_MC_E2BIG = -5205,    /* value longer than the configured limit */
    OFL_MC_EBADLEN = -5206,  /* binary: extras + key longer than the body */
    OFL_MC_ECHUNK = -5207,   /* text: data block not followed by "\r\n" */
    OFL_MC_ELINE = -5208,    /* text: command line longer than the limit */
    OFL_MC_ETRUNC = -5209,   /* a datagram ends inside a request or its frame header */
    OFL_MC_EUDP = -5210,     /* UDP frame header announces a multi-datagram request */
};
_Static_assert(OFL_ERR_IN(OFL_MC_EMAGIC, MC) && OFL_ERR_IN(OFL_MC_EUDP, MC),
               "a memcached parse error outside its range (err.h)");

/* Text for `err`: an OFL_MC_E* error, or whatever ofl_strerror (err.h) says of the
 * others. Never NULL; the string is static. */
const char *ofl_mc_strerror(int err);

/* Which framing a request used. */
enum ofl_mc_proto {
    OFL_MC_ANY = 0,     /* parse: decide from the first byte (0x80 = binary) */
    OFL_MC_BINARY = 1,
    OFL_MC_TEXT = 2,
};

/* What a request asks for, whatever its protocol. */
enum ofl_mc_cmd {
    OFL_MC_CMD_NONE = 0,
    OFL_MC_CMD_GET,     /* binary GET/GETQ/GETK/GETKQ; text "get" (one or more keys) */
    OFL_MC_CMD_GETS,    /* text "gets": like get, and the reply carries the CAS */
    OFL_MC_CMD_SET,
    OFL_MC_CMD_ADD,
    OFL_MC_CMD_REPLACE,
    OFL_MC_CMD_CAS,     /* text "cas" (binary: SET with a non-zero CAS) */
    OFL_MC_CMD_DELETE,
    OFL_MC_CMD_NOOP,
    OFL_MC_CMD_VERSION,
    OFL_MC_CMD_QUIT,
    OFL_MC_CMD_APPEND,  /* text append; binary APPEND(Q) */
    OFL_MC_CMD_PREPEND,
    OFL_MC_CMD_INCR,    /* text incr; binary INCREMENT(Q): delta, initial, exptime */
    OFL_MC_CMD_DECR,
    OFL_MC_CMD_TOUCH,   /* text touch; binary TOUCH: exptime */
    OFL_MC_CMD_GAT,     /* text gat (several keys); binary GAT(Q)/GATK(Q) */
    OFL_MC_CMD_GATS,    /* text gats: gat with the CAS */
    OFL_MC_CMD_FLUSH,   /* text flush_all [delay]; binary FLUSH(Q): exptime = delay */
    OFL_MC_CMD_STATS,   /* text stats [args] (args view); binary STAT (key: the group) */
    OFL_MC_CMD_VERBOSITY,
    OFL_MC_CMD_SHUTDOWN,
    OFL_MC_CMD_MG,      /* meta get: mflags, exptime (T), ttl_vivify (N), recache (R) */
    OFL_MC_CMD_MS,      /* meta set: value, flags (F), exptime (T), cas (C), mode (M) */
    OFL_MC_CMD_MD,      /* meta delete: cas (C), exptime (T) */
    OFL_MC_CMD_MA,      /* meta arithmetic: delta (D), initial (J), mode (M), ... */
    OFL_MC_CMD_MN,      /* meta no-op */
};

/* The bit of meta flag letter `c` ('A'..'Z', 'a'..'z') in ofl_mc_req.mflags. */
#define OFL_MC_MF(c) ((c) >= 'a' ? 1ull << (26 + (c) - 'a') : 1ull << ((c) - 'A'))
/* Longest opaque token (O flag) a meta command may carry, the 'O' included. */
#define OFL_MC_OPAQUE_MAX 32u

/* Limits the parser enforces. */
struct ofl_mc_limits {
    uint32_t value_max;   /* longest value accepted (bytes) */
    uint32_t line_max;    /* longest text command line, "\r\n" included */
};

/* One parsed request; every pointer is a view into the parsed buffer. */
struct ofl_mc_req {
    uint8_t proto;          /* enum ofl_mc_proto */
    uint8_t cmd;            /* enum ofl_mc_cmd */
    uint8_t opcode;         /* binary opcode (0 for text) */
    uint8_t quiet;          /* binary Q opcodes; text "noreply" */
    uint8_t want_key;       /* binary GETK/GETKQ: the reply carries the key */
    uint8_t fatal;          /* on error: close the connection after the reply */
    uint8_t key_b64;        /* meta flag b: the key is base64 (ofl_mc_key_decode) */
    uint8_t mode;           /* meta M: the mode letter (0: none) */
    uint32_t nkeys;         /* keys in the request (text get/gets: 1..; else 0 or 1) */
    uint32_t opaque;        /* binary: echoed in the reply */
    uint32_t flags;         /* storage commands: client flags (meta: F) */
    int32_t exptime;        /* storage, touch, gat, meta T, binary incr: expiry; flush:
                               delay (parsed, not interpreted) */
    uint64_t cas;           /* binary header CAS; text "cas" unique; meta C */
    uint64_t delta;         /* incr/decr, meta D (default 1) */
    uint64_t initial;       /* binary incr, meta J: value of a created item */
    uint64_t mflags;        /* meta: the flags present, OFL_MC_MF(letter) each */
    int32_t ttl_vivify;     /* meta N: expiry of an item created on a miss */
    int32_t recache;        /* meta R: recache threshold (seconds of TTL left) */
    const uint8_t *args;    /* meta: the flag tokens (to answer them in order);
                               text stats: its arguments; binary STAT: its key */
    uint32_t args_len;
    const char *errmsg;     /* on error: memcached's text reply line for it, or NULL
                               (the reply follows from the error code) */
    const uint8_t *key;     /* first (or only) key */
    uint32_t key_len;
    const uint8_t *keys;    /* text get/gets: all keys, space separated (see next_key) */
    uint32_t keys_len;
    const uint8_t *extras;  /* binary extras */
    uint32_t extras_len;
    const uint8_t *value;   /* storage commands: the data */
    uint32_t value_len;
    size_t len;             /* bytes of the request (complete, or bad: to skip) */
    size_t need;            /* incomplete: at least this many more bytes */
};

/* A parsed binary response (what a client reads); views into the buffer. */
struct ofl_mc_res {
    uint8_t opcode;
    uint16_t status;
    uint32_t opaque;
    uint64_t cas;
    const uint8_t *extras;
    uint32_t extras_len;
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len;
    size_t len;             /* bytes of the response */
};

/* The UDP frame header. */
struct ofl_mc_udp_hdr {
    uint16_t request_id;
    uint16_t seq;
    uint16_t count;
    uint16_t reserved;
};

/* The defaults: value_max 1 MiB, line_max 16 KiB. */
struct ofl_mc_limits ofl_mc_default_limits(void);

/* Parse one request at the front of `buf` (`len` bytes). `proto` OFL_MC_BINARY or
 * OFL_MC_TEXT forces a framing (a TCP connection keeps the one its first request
 * used); OFL_MC_ANY decides from the first byte. `lim` NULL = the defaults.
 * Returns the request's length (> 0), 0 if incomplete (req->need set), or an
 * OFL_MC_E* error (req->len, req->fatal set); see the file comment. */
ssize_t ofl_mc_parse(const uint8_t *buf, size_t len, enum ofl_mc_proto proto,
                     const struct ofl_mc_limits *lim, struct ofl_mc_req *req);

/* Iterate over the keys of a text get/gets: `*pos` starts at req->keys and `end`
 * is req->keys + req->keys_len. Stores the next key's view and returns 1, or 0
 * when there are no more keys. (Also walks a meta command's flag tokens, args.) */
int ofl_mc_next_key(const uint8_t **pos, const uint8_t *end, const uint8_t **key,
                    uint32_t *key_len);

/* Decode a meta command's base64 key (req->key_b64) into `out` (room for
 * OFL_MC_KEY_MAX bytes), as memcached decodes it (characters outside the alphabet
 * are skipped; the rest must be whole 4-character groups). Returns the decoded
 * length (> 0), or 0 when it does not decode. */
size_t ofl_mc_key_decode(const uint8_t *in, size_t len, uint8_t *out);

/* Encode `len` bytes as base64 with padding into `out` (room for 4 * ceil(len / 3)
 * bytes). Returns the encoded length. */
size_t ofl_mc_key_encode(const uint8_t *in, size_t len, uint8_t *out);

/* Parse one binary response at the front of `buf`. Returns its length (> 0), 0 if
 * incomplete (`*need` = bytes missing, if need is not NULL), OFL_MC_EMAGIC (first
 * byte not 0x81) or OFL_MC_EBADLEN (extras + key longer than the body). */
ssize_t ofl_mc_parse_response(const uint8_t *buf, size_t len, struct ofl_mc_res *res,
                              size_t *need);

/* Read the UDP frame header at the front of a datagram of `len` bytes. Returns
 * OFL_MC_UDP_HDR_LEN, OFL_MC_ETRUNC (shorter than 8 bytes) or OFL_MC_EUDP (the
 * request spans several datagrams: count != 1, which memcached does not support
 * either). */
int ofl_mc_udp_parse(const uint8_t *buf, size_t len, struct ofl_mc_udp_hdr *h);

/* Write a UDP frame header (8 bytes) to `out`. */
void ofl_mc_udp_write(uint8_t *out, uint16_t request_id, uint16_t seq, uint16_t count);

/* Write a binary request: header, extras, key, value. Returns the bytes written
 * or -ENOSPC if `cap` is too small, -EINVAL if a length does not fit its field. */
ssize_t ofl_mc_write_request(uint8_t *out, size_t cap, uint8_t opcode, uint32_t opaque,
                             uint64_t cas, const void *extras, uint8_t extras_len,
                             const void *key, size_t key_len, const void *value,
                             size_t value_len);

/* Write a binary response header (24 bytes) for a body of `body_len` bytes whose
 * first extras_len + key_len bytes are extras and key. */
void ofl_mc_write_res_header(uint8_t *out, uint8_t opcode, uint16_t status,
                             uint8_t extras_len, uint16_t key_len, uint32_t body_len,
                             uint32_t opaque, uint64_t cas);

/* Write a complete binary response: header, extras, key, value. Returns the bytes
 * written, -ENOSPC or -EINVAL as ofl_mc_write_request(). */
ssize_t ofl_mc_write_response(uint8_t *out, size_t cap, uint8_t opcode, uint16_t status,
                              uint32_t opaque, uint64_t cas, const void *extras,
                              uint8_t extras_len, const void *key, size_t key_len,
                              const void *value, size_t value_len);

/* Write a binary error response for `opcode`: the status and memcached's text for
 * it as the value ("Not found", "Data exists for key.", "Too large.", ...).
 * Returns the bytes written or -ENOSPC. */
ssize_t ofl_mc_write_status(uint8_t *out, size_t cap, uint8_t opcode, uint32_t opaque,
                            uint16_t status);

/* memcached's text for a binary status ("Unknown error" for codes it lacks). */
const char *ofl_mc_status_text(uint16_t status);

/* Write a text "VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n" (the CAS only
 * if with_cas). Returns the bytes written or -ENOSPC. */
ssize_t ofl_mc_write_text_value(uint8_t *out, size_t cap, const void *key, size_t key_len,
                                uint32_t flags, const void *value, size_t value_len,
                                int with_cas, uint64_t cas);

/* Write a text reply line: `line` then "\r\n" ("STORED", "END", "NOT_FOUND", ...).
 * Returns the bytes written or -ENOSPC. */
ssize_t ofl_mc_write_text_line(uint8_t *out, size_t cap, const char *line);

/* Write the reply to a request that ofl_mc_parse() rejected with `err`, in the
 * request's protocol (see the file comment). Returns the bytes written (0: no
 * reply, e.g. a bad magic byte) or -ENOSPC. */
ssize_t ofl_mc_write_error(uint8_t *out, size_t cap, const struct ofl_mc_req *req, int err);


#endif
