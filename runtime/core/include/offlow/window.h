/* The interconnect window: a shared-memory file mapped by every process of a
 * program. It starts with a header page (magic, size, version, abort word); the
 * rings and shared tables follow at offsets both sides compute the same way. */
#ifndef OFL_WINDOW_H
#define OFL_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#define OFL_WINDOW_MAGIC 0x314e49574c464f00ull /* "\0OFLWIN1" little-endian */
#define OFL_WINDOW_VERSION 2u
/* Rings start at or after this offset. */
#define OFL_WINDOW_HDR_SIZE 4096

/* The header at offset 0 of the window. */
struct ofl_window_hdr {
    uint64_t magic;            /* OFL_WINDOW_MAGIC once the window is initialized */
    uint64_t size;             /* bytes in the window (= file size) */
    uint32_t version;          /* OFL_WINDOW_VERSION */
    volatile uint32_t abort;   /* nonzero: some process failed, everyone stops */
    uint64_t chan_off;         /* the channel region (chan.h), 0 when the program has none */
    uint64_t chan_size;
    volatile uint32_t stop;    /* set by a host session: processes serving channels exit */
    volatile uint32_t drained; /* processes whose packet cores are all done (--serve) */
    int32_t runner;            /* pid of the process that runs the program (0: unknown);
                                  while it lives the window is in use */
    volatile uint32_t stats_req; /* raised by a reader of live stats (offlow stats, the
                                  metrics server): each process then writes its stats
                                  file's live copy (live.h) */
    uint8_t pad_[64 - 56];     /* keep the header on its own cache line */
};
_Static_assert(sizeof(struct ofl_window_hdr) == 64, "window header is one cache line");
_Static_assert(sizeof(struct ofl_window_hdr) <= OFL_WINDOW_HDR_SIZE, "window header too big");

/* The emulated interconnect's state (profile-scaled runs), shared by every core of
 * every process on the window, on the cache line after the header: when the bytes
 * sent so far will have crossed each direction of the link (free_ns[0]: from the
 * device, [1]: from the host) and the DMA engine both directions share (CLOCK_MONOTONIC
 * ns; 0 in a new window). */
struct ofl_window_link {
    uint64_t free_ns[2];
    uint64_t dma_free_ns;
    uint8_t pad_[64 - 24];
};
#define OFL_WINDOW_LINK_OFF 64u
_Static_assert(OFL_WINDOW_LINK_OFF + sizeof(struct ofl_window_link) <= OFL_WINDOW_HDR_SIZE,
               "the link state fits in the header's page");

/* A process's mapping of the window. */
struct ofl_window {
    uint8_t *base;   /* start of the mapping */
    size_t size;     /* bytes mapped */
    int fd;          /* the open file, -1 when closed */
};

/* Create the window file `path` (must not exist; mode 0600) of `size` bytes
 * (>= OFL_WINDOW_HDR_SIZE), map it and write the header.
 * Returns 0, -EINVAL (size too small), -EEXIST, or another negative errno; a file
 * it created is removed again when a later step fails (sizing it, mapping it). */
int ofl_window_create(struct ofl_window *w, const char *path, size_t size);

/* Map an existing window and check its magic, version and size against the file.
 * Returns 0, -ENOENT, -EINVAL (not a window, or a damaged one), or a negative errno. */
int ofl_window_open(struct ofl_window *w, const char *path);

/* Unmap and close (the file stays; whoever created it removes it). Idempotent. */
void ofl_window_close(struct ofl_window *w);

/* The header's layout for callers outside C (offlow/channels.py reads and writes the
 * header through it: the one source of its offsets). Byte offset and size of field
 * `name` of struct ofl_window_hdr ("magic", "size", "version", "abort", "chan_off",
 * "chan_size", "stop", "drained", "runner",
 * "stats_req"). Returns 0, or -ENOENT for another name. */
int ofl_window_hdr_field(const char *name, uint64_t *off, uint32_t *size);

/* The value of constant `name`: "magic" (OFL_WINDOW_MAGIC), "version"
 * (OFL_WINDOW_VERSION) or "hdr_size" (OFL_WINDOW_HDR_SIZE). Returns 0, or -ENOENT. */
int ofl_window_hdr_const(const char *name, uint64_t *value);

/* Address of byte `off` of the window (no bounds check: offsets come from the layout). */
static inline void *ofl_window_at(const struct ofl_window *w, size_t off)
{
    return w->base + off;
}

#endif
