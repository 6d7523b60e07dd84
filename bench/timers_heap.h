/*
 * timers_heap.h — the plain binary heap baseline of //bench:timers
 * (timers_heap.cc, C++), callable from C.
 */
#ifndef BENCH_TIMERS_HEAP_H
#define BENCH_TIMERS_HEAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Room for n timers, once, before the rounds. 0, or -1 if out of memory. */
int timers_heap_reserve(size_t n);

/* Empty the heap, then push (deadlines[i], i) for i = 0 .. n-1. */
void timers_heap_push_all(const uint64_t *deadlines, size_t n);

/* Pop every timer; returns how many came out before the one popped just
 * before them (0 if the heap is correct). *checksum = sum of the seqs. */
size_t timers_heap_pop_all(uint64_t *checksum);

#ifdef __cplusplus
}
#endif

#endif /* BENCH_TIMERS_HEAP_H */
