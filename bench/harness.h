/*
 * harness.h — the timing loop every benchmark binary shares.
 *
 * A benchmark supplies one function, "do this operation n times", and the
 * harness does the rest:
 *
 *   1. warm-up and calibration: run the operation with growing n until one
 *      run lasts at least the round length (default 60 ms); that n is kept
 *      for every round, so a slow back-end simply gets fewer iterations;
 *   2. rounds: run n operations, time them with clock_gettime
 *      (CLOCK_MONOTONIC), print one machine-readable line per round;
 *   3. (stand-alone mode) print the median of the rounds.
 *
 * Command line of every benchmark binary:
 *
 *   NAME [--rounds N] [--round-ms MS] [--lockstep]
 *
 *   --rounds N     rounds to run (default 9); ignored with --lockstep
 *   --round-ms MS  minimum length of one round (default 60)
 *   --lockstep     warm up, print "ready ...", then run one round for each
 *                  line read on standard input, until end of input. This is
 *                  how bench/switch_runner.py interleaves several binaries
 *                  round by round, so machine noise hits them all alike.
 *
 * Output lines are `key=value` fields separated by spaces:
 *
 *   ready  name=asm ops_per_round=33554432 unit=switch units_per_op=2
 *   round  name=asm index=1 ops=33554432 ns=71234567 ns_per_unit=1.061
 *   median name=asm rounds=9 ns_per_unit=1.058
 */
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Performs the measured operation `n` times. `ctx` is the benchmark's own
 * state. It must do real, observable work (the harness cannot check). */
typedef void (*bench_run_fn)(void *ctx, uint64_t n);

/* What one benchmark measures. */
typedef struct {
    const char *name;      /* short name printed in every line, e.g. "asm" */
    const char *unit;      /* what is reported per ns, e.g. "switch" */
    unsigned units_per_op; /* units in one operation: a resume+yield = 2 */
    bench_run_fn run;      /* the operation, n times */
    void *ctx;             /* passed to run */
} bench_spec;

/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t bench_now_ns(void);

/* Parses the command line, runs the benchmark as described above and
 * returns the process exit status (0, or 2 on a bad command line). */
int bench_main(int argc, char **argv, const bench_spec *spec);

#ifdef __cplusplus
}
#endif

#endif /* BENCH_HARNESS_H */
