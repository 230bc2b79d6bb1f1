/* The command-line drivers' file, clock and argument helpers (the LPM check, the
 * router and key-value benchmarks): each failure ends the program with a message
 * naming the file or argument, as a driver's contract says. */
#ifndef OFL_TOOL_IO_H
#define OFL_TOOL_IO_H

#include <stddef.h>

/* Everything `path` holds (its size in *len; free() it); exits on error. */
void *tool_read(const char *path, size_t *len);

/* Write `len` bytes to `dir`/`name`; exits on error. */
void tool_write(const char *dir, const char *name, const void *data, size_t len);

/* Monotonic time in seconds. */
double tool_now_s(void);

/* The decimal number `s` in [lo, hi]; otherwise prints "<tool>: bad number ..." and
 * exits with status 2 (a usage error). */
long tool_number(const char *tool, const char *s, long lo, long hi);

#endif
