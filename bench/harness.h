/*
 * harness.h — the timing loop every benchmark binary shares.
 *
 * A benchmark supplies one function, "do this operation n times" (plus
 * optional set-up and tear-down), and the harness does the rest:
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
 *   ready  name=asm ops_per_round=3125660 unit=switch units_per_op=2 mode=opt
 *   round  name=asm index=1 ops=3125660 ns=69539208 ns_per_unit=22.245
 *   median name=asm rounds=9 ns_per_unit=22.081
 *
 * `mode` is Bazel's compilation mode, that of the library under test.
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

/* Set-up or tear-down: returns 0, or non-zero after printing why not. */
typedef int (*bench_step_fn)(void *ctx);

/* What one benchmark measures. */
typedef struct {
    const char *name;       /* short name printed in every line, e.g. "asm" */
    const char *unit;       /* what is reported per ns, e.g. "switch" */
    unsigned units_per_op;  /* units in one operation: a resume+yield = 2 */
    bench_step_fn setup;    /* before the first run; may be NULL */
    bench_run_fn run;       /* the operation, n times */
    bench_step_fn teardown; /* after the last run (checks, frees); or NULL */
    void *ctx;              /* passed to all three */
} bench_spec;

/*
 * Floating-point status flags, and why the harness clears them.
 *
 * A context switch that follows the ABI restores MXCSR, the SSE control
 * and status register: Boost's saves and loads all of it, and so does ours
 * in its LOAD mode, the one chosen on AMD (in COMPARE mode, chosen
 * elsewhere, only when a control bit differs: see switch_x86_64.S). MXCSR
 * also holds sticky exception flags: one inexact division sets "precision"
 * until someone clears it. If the thread has such a flag set and the other
 * context does not, every switch loads a *different* MXCSR value. On the
 * course's x86-64 machines that took Boost's jump_fcontext from ~4 ns to
 * ~53 ns per switch (and ours from ~10 to ~100 ns, before it changed).
 * The harness computes with doubles between rounds, so without care it
 * would measure that instead of the switch. bench_main
 * therefore clears the flags before setup (a context made there copies the
 * thread's MXCSR) and before every timed run.
 */
/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t bench_now_ns(void);

/* Parses the command line, runs the benchmark as described above and
 * returns the process exit status: 0; 1 if setup or teardown failed; 2 on
 * a bad command line. */
int bench_main(int argc, char **argv, const bench_spec *spec);

#ifdef __cplusplus
}
#endif

#endif /* BENCH_HARNESS_H */
