/* Stopping a process cleanly on SIGINT / SIGTERM, without a signal handler.
 *
 * A generated program blocks both signals in every thread before it starts any, so
 * a signal stays pending instead of killing it; its loops poll ofl_stop_requested()
 * (the UDP source when idle, every source through ofl_core_stopping) and finish as
 * if their input had ended, so queues close and stats are written: a UDP run serves
 * until then, and a replay or synthetic run stops early with what it counted.
 * Nothing consumes the signal: every thread sees it. */
#ifndef OFL_STOP_H
#define OFL_STOP_H

/* Block SIGINT and SIGTERM in the calling thread (threads created later inherit
 * the mask) and set their action to the default, so that one inherited as ignored
 * still stays pending; ignore SIGPIPE (a write to a closed pipe fails with EPIPE
 * instead).  Call it before any other thread starts.  Returns 0 or a negative
 * errno. */
int ofl_stop_signals_block(void);

/* 1 when SIGINT or SIGTERM is pending for this process (blocked by
 * ofl_stop_signals_block and sent since), else 0.  One system call. */
int ofl_stop_requested(void);

#endif
