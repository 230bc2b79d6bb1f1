/* A remote device's run setup (docs/remote.md): the message in which the host's
 * stand-in tells the device's server what to run. Its header is struct
 * ofl_setup_hdr; its data is one direction per ring of the window ('o': the device
 * produces it, 'i': it consumes it, '-': it crosses nothing there), then the device
 * process's arguments, each ending with a NUL. The executable follows in messages of
 * its own, exe_size bytes in all. */
#ifndef OFL_REMOTE_SETUP_H
#define OFL_REMOTE_SETUP_H

#include <stddef.h>
#include <stdint.h>

#define OFL_SETUP_MAX_RINGS 1024         /* ring directions at most */
#define OFL_SETUP_MAX_PEERS 32           /* liveness pipes of the host's processes */
#define OFL_SETUP_MAX_DATA 8192          /* bytes of directions and arguments */
#define OFL_SETUP_MAX_ARGS 256           /* arguments at most */
#define OFL_SETUP_MAX_EXE (256u << 20)   /* bytes of executable at most */

struct ofl_setup_hdr {
    uint32_t nrings;     /* ring directions at the start of the data */
    uint32_t npeers;     /* the host's processes the device watches (--peer-fd each) */
    uint64_t exe_size;   /* bytes of the executable that follow */
};

/* A setup taken apart: `dirs` and `argv` point into `buf` (a copy of the data). */
struct ofl_setup {
    struct ofl_setup_hdr hdr;
    char buf[OFL_SETUP_MAX_DATA + 1];
    const char *dirs;
    char *argv[OFL_SETUP_MAX_ARGS + 1];  /* NULL after the last */
    uint32_t argc;
};

/* Take the setup message (`hdr`, `hlen` bytes; `data`, `len` bytes) into `s`, checking
 * every rule above (header size and limits, directions, arguments NUL-ended). Returns 0,
 * or -EBADMSG with the reason in `err`. */
int ofl_setup_parse(struct ofl_setup *s, const void *hdr, size_t hlen, const void *data,
                    size_t len, char *err, size_t errlen);

#endif
