/* The command-line drivers' file and clock helpers (the LPM check and the router
 * benchmarks): each failure ends the program with status 1 and a message naming
 * the file, as a driver's contract says. */
#ifndef OFL_TOOL_IO_H
#define OFL_TOOL_IO_H

#include <stddef.h>

/* Everything `path` holds (its size in *len; free() it); exits on error. */
void *tool_read(const char *path, size_t *len);

/* Write `len` bytes to `dir`/`name`; exits on error. */
void tool_write(const char *dir, const char *name, const void *data, size_t len);

/* Monotonic time in seconds. */
double tool_now_s(void);

#endif
