/* Window tests: mode 0600 whatever the umask, exclusive create, header checks on
 * open, shared mapping. Usage: test_window DIR (a scratch directory) */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "offlow/window.h"

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char path[4096], bad[4096], missing[4096];
    snprintf(path, sizeof path, "%s/ofl-test-window-%d", dir, (int)getpid());
    snprintf(bad, sizeof bad, "%s/ofl-test-bad-%d", dir, (int)getpid());
    snprintf(missing, sizeof missing, "%s/ofl-test-missing-%d", dir, (int)getpid());
    unlink(path);
    unlink(bad);

    struct ofl_window w, v;
    mode_t old = umask(0277);   /* would make the file read-only without fchmod */
    CHECK(ofl_window_create(&w, path, 100) == -EINVAL, "a window smaller than its header is refused");
    int rc = ofl_window_create(&w, path, 3 * 4096);
    umask(old);
    CHECK(rc == 0, "create: %s", strerror(-rc));
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600, "the file has mode 0600 (%o)",
          st.st_mode & 07777);
    CHECK(st.st_size == 3 * 4096 && w.size == 3 * 4096, "the file has the requested size");
    struct ofl_window x;
    CHECK(ofl_window_create(&x, path, 3 * 4096) == -EEXIST, "creating it again: -EEXIST");

    CHECK(ofl_window_open(&v, path) == 0 && v.size == w.size, "open maps the whole window");
    uint8_t *a = ofl_window_at(&w, 8192), *b = ofl_window_at(&v, 8192);
    a[5] = 42;
    CHECK(b[5] == 42, "both mappings share memory");
    struct ofl_window_hdr *h = (struct ofl_window_hdr *)w.base;
    CHECK(h->size == w.size && h->version == OFL_WINDOW_VERSION && h->abort == 0,
          "header: size, version, abort word");
    ofl_window_close(&v);
    ofl_window_close(&w);
    ofl_window_close(&w);
    CHECK(w.base == NULL && w.fd == -1, "close is idempotent");

    CHECK(ofl_window_open(&v, missing) == -ENOENT, "open of a missing file: -ENOENT");

    /* Same size, wrong magic. */
    int fd = open(bad, O_CREAT | O_EXCL | O_RDWR, 0600);
    char zeros[4096 * 2];
    memset(zeros, 0, sizeof zeros);
    memcpy(zeros, "notawindow", 10);
    CHECK(fd >= 0 && write(fd, zeros, sizeof zeros) == (ssize_t)sizeof zeros, "bad file written");
    close(fd);
    CHECK(ofl_window_open(&v, bad) == -EINVAL, "wrong magic: -EINVAL");
    unlink(bad);

    /* A window file truncated or grown behind our back. */
    CHECK(truncate(path, 2 * 4096) == 0, "window truncated");
    CHECK(ofl_window_open(&v, path) == -EINVAL, "size mismatch: -EINVAL");
    CHECK(truncate(path, 100) == 0, "window truncated below its header");
    CHECK(ofl_window_open(&v, path) == -EINVAL, "shorter than the header: -EINVAL");
    unlink(path);
    return CHECK_DONE();
}
