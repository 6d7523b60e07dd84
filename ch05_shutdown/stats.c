/*
 * stats.c — what coro_sched_stats() reports, and the clock it reads.
 *
 *   pump:  reading ── resume ── resume ── ... ── reading ── resume ── ...
 *          └──────────── one window ──────────┘
 *
 * Statistics are in ticks of coro__ticks(), the processor's cycle counter
 * where there is one, converted to nanoseconds only when they are read.
 *
 * Why windows. Reading the clock at every resume, as the first version of
 * this file did, cost a loop of bare yields 36.6 against 22.3 ns per switch
 * (a cycle-counter read is 20 to 40 cycles on bare metal, and was measured
 * at about 40 ns in a virtual machine). So the pump
 * reads it once per window of resumes: the reading that opens a window
 * ends the previous one, and a post or the pump going idle ends one early,
 * so a sleep is never inside a window. A window's length is charged as
 * the length of its longest resume: exact for a window of one, an upper
 * bound otherwise; inside a window every resume starts "at" the window's
 * reading, so a wake latency is off by less than a window.
 *
 * How long a window is: about WINDOW_NS, whatever the resumes cost, so
 * that a reading is a small share of a window and every figure is right
 * to within a few microseconds. The pump cannot see a window's length
 * before it ends, so it steers by the last one: a window that ended
 * shorter than WINDOW_NS lets the next hold twice as many resumes (up to
 * WINDOW_MAX); one that ended longer lets the next hold as many as would
 * have fitted at its pace, and resumes of WINDOW_NS or more get a window
 * each, where every figure is exact. The price: the first window after
 * resumes turn long may charge a few microseconds of short resumes to its
 * longest one; the next window holds one again.
 *
 * The two steps the pump takes when something becomes ready and at every
 * resume, coro__ready_stamp() and coro__timing_open(), are inline
 * functions in sched_impl.h, so that their common case costs no call.
 * Their slow paths, which read the clock or measure a wait, are here.
 *
 * Owns: the statistics fields of struct coro_sched, each coroutine's
 * ready_at, and the tick clock's rate. Thread: the scheduler's owner only
 * (coro_sched_stats() checks it); coro__ticks() and coro__ticks_to_ns()
 * on any thread.
 */
#define _GNU_SOURCE
#include "sched_impl.h"

#include <errno.h>
#include <pthread.h>

/* ── The tick clock ───────────────────────────────────────────────────── */

/*
 * The statistics clock (coro_sched_stats()): the processor's cycle counter
 * where there is one — a few nanoseconds to read, against about twenty for
 * clock_gettime() — converted to nanoseconds with a rate measured once
 * against CLOCK_MONOTONIC.
 */
uint64_t coro__ticks(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;

    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
    uint64_t ticks;

    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(ticks));
    return ticks;
#else
    return coro_now();
#endif
}

/* Nanoseconds per tick, found when the process's first scheduler is
 * created (coro__ticks_rate_measure()): before any pump reads the
 * counter, so the 2 ms the measuring takes on x86-64 falls in no window
 * and in no wait. */
static double ns_per_tick;
static pthread_once_t ns_per_tick_once = PTHREAD_ONCE_INIT;

/* One clock reading with the tick count taken right around it: the pair
 * is trusted only if both tick reads are close together (1,000 ticks:
 * well under a microsecond at the rates of real counters), so a thread
 * preempted between the two reads tries again instead of skewing the
 * rate. (A single unbracketed read was skewed by such a stall: in a CI
 * run under qemu on a loaded machine every statistic of one process read
 * about 3.5 times too low.) */
static void clock_and_ticks(uint64_t *ns, uint64_t *ticks)
{
    for (int tries = 0;; tries++) {
        uint64_t before = coro__ticks();

        *ns = coro_now();
        *ticks = coro__ticks();
        if (*ticks - before < 1000 || tries == 100) {
            *ticks = before + (*ticks - before) / 2;
            return;
        }
    }
}

static void measure_ns_per_tick(void)
{
#if defined(__aarch64__)
    /* The architecture states the counter's frequency: no measuring. */
    uint64_t hz;

    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(hz));
    if (hz != 0) {
        ns_per_tick = 1e9 / (double)hz;
        return;
    }
#endif
    uint64_t n0, t0, n1, t1;

    clock_and_ticks(&n0, &t0);
    do
        clock_and_ticks(&n1, &t1);
    while (n1 - n0 < 2 * CORO_MSEC);
    ns_per_tick = t1 > t0 ? (double)(n1 - n0) / (double)(t1 - t0) : 1.0;
}

void coro__ticks_rate_measure(void)
{
    pthread_once(&ns_per_tick_once, measure_ns_per_tick);
}

uint64_t coro__ticks_to_ns(uint64_t ticks)
{
    coro__ticks_rate_measure(); /* known already, but cheap to ask */
    return (uint64_t)((double)ticks * ns_per_tick);
}

/* ── Timing the pump ──────────────────────────────────────────────────── */

/* Windows (see the top of this file) aim at this length, */
#define WINDOW_NS 2000
/* and never hold more resumes than this. (A reading costs 8 to 40 ns;
 * yields at 15 ns fill 2 µs with about 130, so windows of them settle
 * between 128 and 256, and the reading costs them 0.1 to 0.3 ns each.) */
#define WINDOW_MAX 256

/* The first stamp after a sleep (coro__ready_stamp() in sched_impl.h):
 * a reading of its own. A wait hook wakes coroutines from inside its wait
 * (coro_sched_set_wait()), when it has seen their readiness: the reading
 * from before the wait is as old as the wait, and would charge all of it
 * to their latency. The stamps after it share its reading. */
void coro__timing_refresh(coro_sched *s)
{
    s->ticks_hint = coro__ticks();
    s->hint_stale = false;
}

/* WINDOW_NS in ticks (a division per window, which costs nothing beside
 * the reading that ends it). The rate is known: a window belongs to a
 * scheduler, and creating one measured it. */
static uint64_t window_ticks(void)
{
    return (uint64_t)(WINDOW_NS / ns_per_tick) + 1;
}

/* The size of the window after one of `held` resumes that lasted
 * `length` ticks. */
static int next_window_size(int size, int held, uint64_t length)
{
    uint64_t target = window_ticks();
    uint64_t fitted;

    if (length < target)
        return 2 * size < WINDOW_MAX ? 2 * size : WINDOW_MAX;
    fitted = (uint64_t)held * target / length; /* at this window's pace */
    return fitted > 0 ? (int)fitted : 1;       /* (at most `held`) */
}

/* End the window in progress at `now`, a reading, and choose the size of
 * the next one. Called before ticks_hint changes. */
static void window_close(coro_sched *s, uint64_t now)
{
    int held = s->window_size - s->window_left;
    coro *only = s->window_first;
    uint64_t length;

    if (!s->window_open)
        return;
    length = now - s->window_start;
    s->resumes += (uint64_t)held;
    if (length > s->longest_resume)
        s->longest_resume = length; /* charged to its longest resume */
    /* A window of one resume: its coroutine, if it still carries the
     * window's reading (it yielded, or a turn that began after its resume
     * woke it), became ready after that resume ended, at `now` as near as
     * the pump knows (coro__timing_open() says why). If it waits instead,
     * the stamp is never read: what makes it ready stamps it again. */
    if (held == 1 && only != NULL && only->ready_at == s->ticks_hint)
        only->ready_at = now;
    s->window_size = next_window_size(s->window_size, held, length);
    s->window_left = 0;
    s->window_first = NULL; /* so, non-NULL only while a window is open */
    s->window_open = false;
}

/* The pump turns to something else than a resume (a post, or sleep): the
 * window ends here. */
void coro__timing_pause(coro_sched *s)
{
    if (s->window_open) {
        uint64_t now = coro__ticks();

        window_close(s, now);
        s->ticks_hint = now;
    }
}

void coro__timing_sleep(coro_sched *s)
{
    coro__timing_pause(s);
    s->hint_stale = true;
}

/* A resume of `c` starts and the window is full, or none is open
 * (coro__timing_open() in sched_impl.h): one clock reading ends the
 * window in progress and opens the next, with `c` its first resume.
 * Returns the new window's room. */
int coro__timing_new_window(coro_sched *s, coro *c)
{
    uint64_t now = coro__ticks();

    s->window_left = 0; /* full (if open): `c` is not the old window's */
    window_close(s, now);
    if (s->window_size == 0)
        s->window_size = 1; /* the first window */
    s->ticks_hint = now;
    s->hint_stale = false;
    s->window_start = now;
    s->window_left = s->window_size - 1; /* `c` is its first */
    s->window_first = c;
    s->window_open = true;
    return s->window_left;
}

/* `c`, about to be resumed, carries a stamp other than the window's
 * reading (coro__timing_open()): add its wait to the sums, and stamp it
 * with the reading, which is where its resume starts. */
void coro__timing_waited(coro_sched *s, coro *c)
{
    uint64_t latency;

    if (c->ready_at == CORO_READY_OUTSIDE_PUMP) {
        s->unmeasured++;
    } else {
        latency = s->ticks_hint > c->ready_at ? s->ticks_hint - c->ready_at
                                              : 0;
        s->latency_sum += latency;
        if (latency > s->latency_max)
            s->latency_max = latency;
    }
    c->ready_at = s->ticks_hint;
}

int coro_sched_stats(const coro_sched *s, coro_stats *out)
{
    uint64_t measured; /* resumes whose wait was measured */

    if (s == NULL || out == NULL)
        return EINVAL;
    if (!coro__sched_on_owner_thread(s))
        return EPERM;
    out->alive = coro__alive_count(s);
    out->ready = s->ready_count;
    out->posts_pending = coro__posts_pending(s);
    out->posts_rejected = atomic_load(&s->posts_rejected);
    out->timers_pending = s->timers.count;
    out->resumes =
        s->resumes +
        (s->window_open ? (uint64_t)(s->window_size - s->window_left) : 0);
    measured = out->resumes - s->unmeasured;
    out->longest_resume_ns = coro__ticks_to_ns(s->longest_resume);
    out->wake_latency_max_ns = coro__ticks_to_ns(s->latency_max);
    out->wake_latency_mean_ns =
        measured ? coro__ticks_to_ns(s->latency_sum / measured) : 0;
    out->closed = coro__is_closed(s);
    return 0;
}
