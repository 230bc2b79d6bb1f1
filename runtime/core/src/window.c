/* The interconnect window: a shared-memory file. */
#include "offlow/window.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int ofl_window_create(struct ofl_window *w, const char *path, size_t size)
{
    w->base = NULL;
    w->size = 0;
    w->fd = -1;
    if (size < OFL_WINDOW_HDR_SIZE || (off_t)size < 0) return -EINVAL;
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    int rc = 0;
    /* The umask may have narrowed the mode; make it exactly 0600. */
    if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)size) < 0) rc = -errno;
    void *m = MAP_FAILED;
    if (!rc) {
        m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) rc = -errno;
    }
    if (rc) {   /* the file is ours (O_EXCL): no half-made window stays behind */
        unlink(path);
        close(fd);
        return rc;
    }
    struct ofl_window_hdr *h = m;
    h->size = size;
    h->version = OFL_WINDOW_VERSION;
    h->abort = 0;
    /* The magic last: a window with a magic is complete. */
    __atomic_store_n(&h->magic, OFL_WINDOW_MAGIC, __ATOMIC_RELEASE);
    w->base = m;
    w->size = size;
    w->fd = fd;
    return 0;
}

int ofl_window_open(struct ofl_window *w, const char *path)
{
    w->base = NULL;
    w->size = 0;
    w->fd = -1;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < OFL_WINDOW_HDR_SIZE) {
        close(fd);
        return -EINVAL;
    }
    size_t size = (size_t)st.st_size;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    const struct ofl_window_hdr *h = m;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != OFL_WINDOW_MAGIC ||
        h->version != OFL_WINDOW_VERSION || h->size != size) {
        munmap(m, size);
        close(fd);
        return -EINVAL;
    }
    w->base = m;
    w->size = size;
    w->fd = fd;
    return 0;
}

void ofl_window_close(struct ofl_window *w)
{
    if (w->base) munmap(w->base, w->size);
    if (w->fd >= 0) close(w->fd);
    w->base = NULL;
    w->size = 0;
    w->fd = -1;
}

#define FIELD(f) { #f, offsetof(struct ofl_window_hdr, f), sizeof(((struct ofl_window_hdr *)0)->f) }
static const struct {
    const char *name;
    size_t off, size;
} hdr_fields[] = {
    FIELD(magic), FIELD(size), FIELD(version), FIELD(abort), FIELD(chan_off),
    FIELD(chan_size), FIELD(stop), FIELD(drained), FIELD(runner), FIELD(stats_req),
};
#undef FIELD

int ofl_window_hdr_field(const char *name, uint64_t *off, uint32_t *size)
{
    for (size_t i = 0; i < sizeof hdr_fields / sizeof hdr_fields[0]; i++) {
        if (!strcmp(hdr_fields[i].name, name)) {
            *off = hdr_fields[i].off;
            *size = (uint32_t)hdr_fields[i].size;
            return 0;
        }
    }
    return -ENOENT;
}

int ofl_window_hdr_const(const char *name, uint64_t *value)
{
    if (!strcmp(name, "magic")) *value = OFL_WINDOW_MAGIC;
    else if (!strcmp(name, "version")) *value = OFL_WINDOW_VERSION;
    else if (!strcmp(name, "hdr_size")) *value = OFL_WINDOW_HDR_SIZE;
    else return -ENOENT;
    return 0;
}
