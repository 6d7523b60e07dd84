/*
 * timer_heap_test.c — the timer heap of ch03_timers/timer.c on its own
 * (chapters 4 and 5 carry the same file), checked against a plain model.
 *
 *   ./tools/bazelw test //tests:timer_heap              # as shipped
 *   ./tools/bazelw test //tests:timer_heap_renumber     # seq runs out often
 *
 * The public suite (timers_test.cc) sees the heap only through sleeps and
 * parks; this one drives the heap directly, with stand-in coroutines (an
 * array of struct coro that the heap never reads), so that it can do a
 * hundred thousand random operations in a second and look inside after
 * each one:
 *
 *   add     a coroutine with no pending timer sets one, at a deadline from
 *           a small range (so that many deadlines are equal: ties);
 *   cancel  a coroutine with a pending timer is woken early
 *           (coro__timers_remove), most of the time: dead timers pile up;
 *   fire    coro__timers_pop_due() with `now` a little past the earliest.
 *
 * The model is a list of (deadline, set order) per pending coroutine.
 * Checked after every step: what fired is exactly what the model says is
 * due, in (deadline, set order) order (so never early, ties first in first
 * out, and never a cancelled timer); coro__timers_next() is the model's
 * earliest; `count` is the model's count; and the heap never holds more
 * than its room (`size` <= `capacity`, and capacity stays what the last
 * reserve gave: dead timers cannot pile up without bound). The stand-in
 * coroutines join a few at a time, with a reserve for each, as coro_go()
 * does, so the arrays also grow while timers are pending.
 *
 * Built twice: as shipped, and with CORO_TIMER_SEQ_END lowered to 1000, so
 * that the 32-bit sequence numbers "run out" every thousand timers and
 * renumber() runs often, with live and dead timers in the heap.
 *
 * Exit status 0 if every check passed, 1 (and the first failure printed)
 * otherwise.
 */
#include "coro_impl.h"

#include <stdio.h>
#include <stdlib.h>

enum { COROUTINES = 300, STEPS = 200000 };

static uint64_t prng_state = 12345;
static uint64_t prng_below(uint64_t n) { /* splitmix64 */
    uint64_t z = (prng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (z ^ (z >> 31)) % n;
}

static coro coros[COROUTINES];

/* The model: per coroutine, whether its timer is pending, its deadline,
 * and its set order (a 64-bit count that never runs out). */
static struct {
    bool pending;
    uint64_t deadline;
    uint64_t order;
} model[COROUTINES];

static uint64_t sets;
static size_t pending;

#define CHECK(condition, ...)                                              \
    do {                                                                   \
        if (!(condition)) {                                                \
            printf("FAIL at step %zu: %s: ", step, #condition);            \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
            return 1;                                                      \
        }                                                                  \
    } while (0)

/* The model's earliest pending coroutine, or -1. */
static int model_earliest(void)
{
    int best = -1;

    for (int i = 0; i < COROUTINES; i++) {
        if (!model[i].pending)
            continue;
        if (best < 0 || model[i].deadline < model[best].deadline ||
            (model[i].deadline == model[best].deadline &&
             model[i].order < model[best].order))
            best = i;
    }
    return best;
}

int main(void)
{
    coro_timers t = {0};
    size_t room = 0, active = 0, fired = 0, cancelled = 0, purges = 0;
    size_t most = 0;
    uint64_t clock = 0;

    for (size_t step = 0; step < STEPS; step++) {
        /* The coroutines come one by one, as coro_go() starts them: each
         * time, room for one more, as the scheduler reserves it (so the
         * arrays grow while timers are pending). */
        size_t want = 8 + step / 400 < COROUTINES ? 8 + step / 400
                                                  : COROUTINES;
        int i;
        unsigned what = (unsigned)prng_below(10);

        if (want != active) {
            active = want;
            CHECK(coro__timers_reserve(&t, active + 1) == 0, "no memory");
            room = t.capacity;
        }
        i = (int)prng_below(active);

        if (!model[i].pending && what < 5) {
            /* Add: most deadlines within 50 ticks of the clock, many
             * equal; one in ten far away, so that cancelled ones stay in
             * the heap long enough to fill it (and make it purge). */
            uint64_t deadline = clock + 1 + (prng_below(10) == 0
                                                 ? prng_below(100000)
                                                 : prng_below(50));
            size_t size_before = t.size;

            coro__timers_add(&t, &coros[i], deadline);
            if (t.size != size_before + 1)
                purges++; /* the add made room by dropping dead timers */
            model[i].pending = true;
            model[i].deadline = deadline;
            model[i].order = sets++;
            pending++;
        } else if (model[i].pending && what < 8) {
            /* Cancel: woken before its deadline. */
            coro__timers_remove(&t, &coros[i]);
            model[i].pending = false;
            pending--;
            cancelled++;
        } else if (what >= 8) {
            /* Fire: the clock moves on, what is due comes out in order. */
            coro *due[16];
            size_t n;

            clock += prng_below(8);
            do {
                n = coro__timers_pop_due(&t, clock, due, 16);
                for (size_t k = 0; k < n; k++) {
                    int expected = model_earliest();
                    int got = (int)(due[k] - coros);

                    CHECK(got >= 0 && got < COROUTINES, "not a coroutine");
                    CHECK(model[got].pending,
                          "coroutine %d fired but has no pending timer "
                          "(a cancelled timer fired)", got);
                    CHECK(model[got].deadline <= clock,
                          "coroutine %d fired early (%llu > %llu)", got,
                          (unsigned long long)model[got].deadline,
                          (unsigned long long)clock);
                    CHECK(got == expected,
                          "coroutine %d fired, expected %d (deadline %llu "
                          "order %llu against %llu order %llu)", got,
                          expected,
                          (unsigned long long)model[got].deadline,
                          (unsigned long long)model[got].order,
                          (unsigned long long)model[expected].deadline,
                          (unsigned long long)model[expected].order);
                    model[got].pending = false;
                    pending--;
                    fired++;
                }
            } while (n == 16);
            {
                int next = model_earliest();

                CHECK(next < 0 || model[next].deadline > clock,
                      "coroutine %d is due but did not fire", next);
            }
        }
        {
            int next = model_earliest();
            uint64_t want = next < 0 ? CORO_FOREVER : model[next].deadline;

            CHECK(t.count == pending, "count %zu, pending %zu", t.count,
                  pending);
            CHECK(t.size <= t.capacity, "size %zu > capacity %zu", t.size,
                  t.capacity);
            CHECK(t.capacity == room, "capacity grew: %zu -> %zu", room,
                  t.capacity);
            if (t.size > most)
                most = t.size;
            /* Now and then, as an idle pump does: the next deadline. */
            if (what == 9)
                CHECK(coro__timers_next(&t) == want, "next %llu, want %llu",
                      (unsigned long long)coro__timers_next(&t),
                      (unsigned long long)want);
        }
    }
    if (purges == 0) {
        printf("FAIL: the heap never filled up with dead timers: the test "
               "did not reach purge()\n");
        return 1;
    }
    printf("PASS: %d steps, %zu timers set, %zu fired, %zu cancelled, %zu "
           "purges; the heap held at most %zu timers (room %zu, for %d "
           "coroutines)\n", STEPS, (size_t)sets, fired, cancelled, purges,
           most, room, COROUTINES);
    coro__timers_free(&t);
    return 0;
}
