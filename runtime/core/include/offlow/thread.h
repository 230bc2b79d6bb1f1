/* CPUs and pinning. */
#ifndef OFL_THREAD_H
#define OFL_THREAD_H

/* CPUs online (at least 1). */
int ofl_ncpus(void);

/* Pin the calling thread to CPU cpu % ofl_ncpus(). Returns 0, 1 when that wrapped
 * (cpu >= ncpus: oversubscribed), or a negative errno (-EINVAL for cpu < 0). */
int ofl_pin_self(int cpu);

#endif
