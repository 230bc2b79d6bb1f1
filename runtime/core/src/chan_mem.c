/* Channels: registered memory (see ofl_chan_mem in chan.h).
 *
 * Side A allocates a sealed memfd and describes the bytes of a bulk transfer as
 * offsets into it; side B maps the same file through /proc/<pid>/fd/<fd> (the way
 * UCX's shared-memory transport reaches a peer's segment) and copies straight
 * between it and its own buffer. B keeps one mapping per end, so a peer that sends
 * from the same buffer again pays no mapping and no page faults. The seals matter:
 * a file that could shrink under B's mapping would fault B's copy engine (SIGBUS),
 * so B maps only files sealed against shrinking, and no more than their size. */
#include "chan_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOAD(p, o) __atomic_load_n((p), __ATOMIC_##o)

int ofl_chan_mem_create(size_t len)
{
    if (len == 0 || len > (1ull << 40)) return -EINVAL;
    int fd = memfd_create("offlow-chan-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    if (ftruncate(fd, (off_t)len) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* A memfd sealed against shrinking: its size and inode, else -EINVAL. */
static int sealed_file(int fd, uint64_t *size, uint64_t *ino)
{
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0) return -EINVAL;
    *size = (uint64_t)st.st_size;
    *ino = (uint64_t)st.st_ino;
    return 0;
}

int ofl_chan_mem_attach(struct ofl_chan_mem *m, int fd, void *addr, size_t len)
{
    uint64_t size, ino;
    if (!m || !addr || len == 0 || sealed_file(fd, &size, &ino) < 0 || size < len)
        return -EINVAL;
    m->addr = addr;
    m->len = len;
    m->fd = fd;
    m->ino = ino;
    return 0;
}

int ofl_chan_mem_alloc(struct ofl_chan_mem *m, size_t len)
{
    if (!m) return -EINVAL;
    memset(m, 0, sizeof *m);
    m->fd = -1;
    int fd = ofl_chan_mem_create(len);
    if (fd < 0) return fd;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int err = -errno;
        close(fd);
        return err;
    }
    int rc = ofl_chan_mem_attach(m, fd, p, len);
    if (rc < 0) {
        munmap(p, len);
        close(fd);
    }
    return rc;
}

void ofl_chan_mem_free(struct ofl_chan_mem *m)
{
    if (!m || !m->addr) return;
    munmap(m->addr, m->len);
    close(m->fd);
    m->addr = NULL;
    m->len = 0;
    m->fd = -1;
}

void chan_mem_unmap(struct ofl_chan_end *e)
{
    uint8_t *base = __atomic_exchange_n(&e->mem_base, NULL, __ATOMIC_ACQ_REL);
    if (base) munmap(base, e->mem_len);
}

int chan_mem_map(struct ofl_chan_end *e, pid_t pid)
{
    const struct chan_side *a = side_peer(e);
    int32_t fd = LOAD(&a->mem_fd, RELAXED);
    uint64_t ino = LOAD(&a->mem_ino, RELAXED), len = LOAD(&a->mem_len, RELAXED);
    if (e->mem_base && e->mem_pid == pid && e->mem_fd == fd && e->mem_ino == ino &&
        e->mem_len >= len)
        return 0;
    chan_mem_unmap(e);
    if (fd < 0 || len == 0) return -EPERM;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, (int)fd);
    int f = open(path, O_RDWR | O_CLOEXEC);
    if (f < 0) return -EPERM;
    uint64_t size, got_ino;
    void *p = MAP_FAILED;
    /* The descriptor number may have been reused for another file: the inode
     * tells. Map what the file holds, never past its (sealed) end. */
    if (sealed_file(f, &size, &got_ino) == 0 && got_ino == ino && size >= len)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    close(f);
    if (p == MAP_FAILED) return -EPERM;
    e->mem_len = size;
    e->mem_pid = pid;
    e->mem_fd = fd;
    e->mem_ino = ino;
    __atomic_store_n(&e->mem_base, (uint8_t *)p, __ATOMIC_RELEASE);
    return 0;
}
