/*
 * trace_impl.h — the trace's side of the pump: what a scheduler keeps for
 * it, and the calls the pump makes. Not for users (coro.h has
 * coro_trace_start()). trace.c has the rest: the buffers, the writer
 * thread and the file.
 *
 * What it costs while off: one relaxed load of `coro__trace_on` and a
 * branch not taken, where the pump chooses its loop (once a turn, and in
 * coro_sched_step()) and where work is created, waits or is woken; the
 * pump's usual loop has no test at all (sched.c, run_turn_traced()).
 * Chapter 2's notes/performance.md has the figures.
 */
#ifndef CORO_TRACE_IMPL_H
#define CORO_TRACE_IMPL_H

#include "coro_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How a resume ended, as the trace shows it (args.left). */
typedef enum {
    CORO_TRACE_YIELDED,
    CORO_TRACE_PARKED,
    CORO_TRACE_FINISHED
} coro_trace_left;

/* What another thread sent to a scheduler (coro__trace_sent()). */
typedef enum {
    CORO_TRACE_SENT_GO,   /* a coroutine to start: coro_go(), coro_spawn() */
    CORO_TRACE_SENT_POST, /* a post: coro_post() */
    CORO_TRACE_SENT_WAKE  /* a coroutine made ready: coro_wake(), an event */
} coro_trace_sent;

/* A buffer of records, filled by one scheduler (trace.c). */
struct trace_buffer;

/*
 * What each scheduler keeps for the trace. Every scheduler is on the
 * trace's list of schedulers (trace.c) from create to destroy, so that
 * coro_trace_stop(), on any thread, can collect what each one recorded.
 *
 * `lock` guards `buffer`: the owner appends under it, and
 * coro_trace_stop() takes the buffer under it. It is taken only while a
 * trace records, and is uncontended but at a stop.
 */
struct sched_trace {
    pthread_mutex_t lock;
    struct trace_buffer *buffer; /* NULL: nothing recorded yet */
    int tid;                     /* the owning thread's: its lane */
    coro_sched *prev, *next;     /* the list of schedulers (trace.c) */
};

/* The number of the trace recording now, 0 while none is. Loaded relaxed
 * by the pump: it only says "try to record"; whether a record is kept is
 * decided under the scheduler's lock (trace.c, append()). */
extern _Atomic uint32_t coro__trace_on;

/* Whether the pump should record what it runs. Constant false in a build
 * without the trace (CORO_NO_TRACE, for the benchmark that compares). */
static inline bool coro__tracing(void)
{
#ifdef CORO_NO_TRACE
    return false;
#else
    return __builtin_expect(
        atomic_load_explicit(&coro__trace_on, memory_order_relaxed) != 0, 0);
#endif
}

/* The trace's clock: CLOCK_MONOTONIC, in nanoseconds. */
uint64_t coro__trace_clock(void);

/* A scheduler was created / is about to be freed (sched.c). Destroy hands
 * over what it recorded. */
void coro__trace_sched_created(coro_sched *s);
void coro__trace_sched_destroyed(coro_sched *s);

/* A pump's resume of `c` ran from `began` (coro__trace_clock()) until now
 * and ended as `left`. Call before the pump retires `c`. */
void coro__trace_resume(coro_sched *s, coro *c, uint64_t began,
                        coro_trace_left left);

/* `c` was created on `s` by coro_go() (detached) or coro_spawn(). */
void coro__trace_created(coro_sched *s, coro *c, bool detached);

/* A post was queued on `s`: returns its number in the trace (its flow
 * arrow's id), 0 if it was not recorded. */
uint64_t coro__trace_posted(coro_sched *s);

/* The post numbered `number` (coro__trace_posted(), not 0) ran from
 * `began` until now. */
void coro__trace_post_ran(coro_sched *s, uint64_t number, uint64_t began);

/* `c` waits (coro__wait()): `why`, until `deadline` (CORO_FOREVER: no
 * deadline). */
void coro__trace_wait(coro *c, coro_wait why, uint64_t deadline);

/* The timer of `c` came due: the pump of `s` fires it. */
void coro__trace_timer(coro_sched *s, coro *c);

/* `c` was made ready (coro__make_ready()), on the thread of `s`: an arrow
 * starts here, to end where `c` runs next (c->trace_arrow). */
void coro__trace_woken(coro_sched *s, coro *c);

/* The calling thread, not the owner of `s`, sends `s` a request: an arrow
 * starts on the caller's lane. Returns its number, for the request to
 * carry to where the arrow ends: a go's first resume (c->trace_arrow), a
 * post's run (trace_number), a wake's taking in (coro__trace_arrived()).
 * 0 if not recorded. Any thread. */
uint64_t coro__trace_sent(coro_sched *s, coro_trace_sent what);

/* The pump of `s` took in a wake that carried the arrow `arrow`. */
void coro__trace_arrived(coro_sched *s, uint64_t arrow);

#endif /* CORO_TRACE_IMPL_H */
