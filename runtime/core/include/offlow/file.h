/* Whole files: the inputs and outputs of offlow's command-line drivers (the LPM
 * check and the router benchmarks read prefix and address files and write next-hop
 * arrays). */
#ifndef OFL_FILE_H
#define OFL_FILE_H

#include <stddef.h>

/* Read everything `path` holds (a regular file, or any readable stream) into a new
 * buffer: *data (free() it; one NUL byte follows the data) and its size in *len.
 * Returns 0 or a negative errno (-ENOENT, -EISDIR, -ENOMEM, ...); on error *data
 * is NULL and *len 0. */
int ofl_file_read(const char *path, void **data, size_t *len);

/* Write `len` bytes from `data` to `dir`/`name` (created or truncated; `dir` NULL:
 * `name` alone). Returns 0 or a negative errno (-ENAMETOOLONG when the path does
 * not fit PATH_MAX). */
int ofl_file_write(const char *dir, const char *name, const void *data, size_t len);

#endif
