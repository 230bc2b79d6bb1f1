/* Whole files (see file.h). Written here rather than with stdio's fseek/ftell, which
 * fail on pipes and report directories as empty files. */
#include "offlow/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Grow *buf (capacity *cap) to hold at least `need` bytes; 0 or -ENOMEM. */
static int grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -ENOMEM;
        c *= 2;
    }
    char *b = realloc(*buf, c);
    if (!b) return -ENOMEM;
    *buf = b;
    *cap = c;
    return 0;
}

int ofl_file_read(const char *path, void **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    /* A regular file's size sizes the buffer at once; streams grow it. */
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int rc = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        rc = grow(&buf, &cap, (size_t)st.st_size + 1);
    while (rc == 0) {
        if ((rc = grow(&buf, &cap, n + 2)) < 0) break;
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0) {
            if (errno == EINTR) continue;
            rc = -errno;
        } else if (got == 0) {
            break;
        } else {
            n += (size_t)got;
        }
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[n] = 0;   /* the loop grew buf before its first read */
    *data = buf;
    *len = n;
    return 0;
}

int ofl_file_write(const char *dir, const char *name, const void *data, size_t len)
{
    char path[PATH_MAX];
    int w = dir ? snprintf(path, sizeof path, "%s/%s", dir, name)
                : snprintf(path, sizeof path, "%s", name);
    if (w < 0 || (size_t)w >= sizeof path) return -ENAMETOOLONG;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    const char *p = data;
    int rc = 0;
    while (len && rc == 0) {
        ssize_t put = write(fd, p, len);
        if (put < 0) {
            if (errno != EINTR) rc = -errno;
        } else {
            p += put;
            len -= (size_t)put;
        }
    }
    if (close(fd) < 0 && rc == 0) rc = -errno;
    return rc;
}
