/* The command-line drivers' file, clock, argument and stop-signal helpers (the LPM
 * check, the router and key-value benchmarks, the key-value and echo servers): each
 * failure of the file and argument helpers ends the program with a message naming the
 * file or argument, as a driver's contract says. */
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

/* SIGTERM and SIGINT blocked in the calling thread (threads it starts after inherit
 * the mask, so none of them is interrupted) and a close-on-exec signalfd that reads
 * them: the servers' main thread waits on it to stop. The fd, or -1 (errno set). */
int tool_stop_signals(void);

#endif
