/* What bench_xdp.bpf.c and its driver bench_xdp.c both know (benchmarks/xdp.py). */
#ifndef OFL_BENCH_XDP_H
#define OFL_BENCH_XDP_H

/* Lookups per run of a batch program (the `_b` programs): B consecutive addresses of
 * the address set, the cursor moving on by B; the driver divides the kernel's time per
 * repetition by it. */
#define OFL_BENCH_XDP_BATCH 32

#endif
