/*
 * check resume_value — Chapter 1, exercise 2.
 *
 * The exercise: write coro_resume_value(c, in) / coro_yield_value(out),
 * passing a value in each direction like Lua's resume/yield (hint: a field
 * in struct coro_thread).
 *
 * What you provide: a change to the library in your lab (no answer file):
 * these two functions in coro.c (declare them in coro.h too; this check
 * declares them itself):
 *
 *     void *coro_resume_value(coro *c, void *in);
 *     void *coro_yield_value(void *out);
 *
 * coro_resume_value(c, in) resumes `c` as coro_resume(c) does, and returns
 *   - the `out` that `c` passed to coro_yield_value(out), if it stopped
 *     there;
 *   - NULL, if it stopped in a plain coro_yield();
 *   - its function's return value (coro_result(c)), if it returned;
 *   - NULL with errno set to coro_resume()'s error (EINVAL, EBUSY, EPERM)
 *     if the resume is refused. (A pointer function reports errors the
 *     library's way: NULL and errno.)
 * coro_yield_value(out) yields as coro_yield() does, and returns, once the
 * coroutine is resumed again, the `in` of that coro_resume_value(), or NULL
 * if a plain coro_resume() resumed it. Outside any coroutine it returns
 * NULL with errno EPERM.
 * The `in` of the resume that starts the coroutine has no coro_yield_value()
 * to return from: do what you like with it (the body has its `arg`); this
 * check does not look.
 *
 * What this check verifies, on the lab's library: values cross in both
 * directions, in order, and pointers cross whole (an address on a
 * coroutine's stack does not fit in an int); a plain yield or resume passes NULL, never a value
 * left over from an earlier transfer (the usual bug: reading back a slot
 * nobody wrote this time); a function's return value comes back from the
 * last resume; transfers nest (a coroutine that resumes another with
 * values, while it is itself resumed with values); errors; and two threads
 * transferring at once do not see each other's values (the slot is per
 * thread). That last part can only catch a shared slot when the threads
 * happen to collide; it never fails a correct answer.
 *
 * Each part is a case run in a child process of its own (a crash or a
 * hang is reported as that case's failure). Built by `tools/lab check
 * ch01 resume_value` with the lab's library sources; it needs nothing but
 * this file. Prints `check resume_value: ok` and exits 0, or one
 * `check resume_value: FAIL: CASE: ...` line per failed case and exits 1.
 */
#define CHECK_NAME "resume_value"
#include "lab_check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "coro.h"

void *coro_resume_value(coro *c, void *in);
void *coro_yield_value(void *out);

#define V(n) ((void *)(uintptr_t)(n))
#define N(p) ((unsigned long)(uintptr_t)(p))

static void expect(void *got, void *want, const char *what)
{
    CHECK(got == want, "%s: got %lu, expected %lu", what, N(got), N(want));
}

static void expect_error(void *got, int err, int want, const char *what)
{
    CHECK(got == NULL && err == want,
          "%s: got %p with errno %d, expected NULL with errno %d", what, got,
          err, want);
}

static coro *new_coro(coro_fn fn)
{
    coro *c = coro_create(fn, NULL, 0);

    CHECK(c != NULL, "coro_create: errno %d", errno);
    return c;
}

/* ── 1. a running sum: values in, sums out, the result at the end ─────── */

static void *running_sum(void *arg)
{
    uintptr_t sum = 0;
    void *in;

    (void)arg;
    while ((in = coro_yield_value(V(sum))) != NULL)
        sum += (uintptr_t)in;
    return V(1000 + sum);
}

/* ── 1b. whole pointers: a 64-bit address crosses intact ───────────────── */

static char text_in[] = "in", *text_seen, *local_sent;

static void *swap_pointers(void *arg)
{
    char local[] = "out"; /* on this coroutine's stack, high in memory */

    (void)arg;
    local_sent = local;
    text_seen = coro_yield_value(local);
    return NULL;
}

/* ── 2. plain coro_yield() and coro_resume() pass NULL ────────────────── */

static void *seen_after_plain_resume = V(12345);

static void *mixes_plain_and_valued(void *arg)
{
    (void)arg;
    coro_yield_value(V(7));      /* main: resume_value() returns 7 */
    coro_yield();                /* main: resume_value() returns NULL */
    seen_after_plain_resume = coro_yield_value(V(8)); /* plain resume: NULL */
    coro_yield();
    return NULL;
}

/* ── 3. nesting: main <-> outer <-> inner, values at both levels ──────── */

static coro *outer, *inner;
static void *inner_got[2], *outer_got[4];
static int outer_busy_err = -1;
static void *outer_busy = V(1);

static void *inner_body(void *arg)
{
    (void)arg;
    outer_busy = coro_resume_value(outer, V(99)); /* outer is NORMAL */
    outer_busy_err = errno;
    inner_got[0] = coro_yield_value(V(11));
    inner_got[1] = coro_yield_value(V(12));
    return V(13);
}

static void *outer_body(void *arg)
{
    (void)arg;
    outer_got[0] = coro_resume_value(inner, V(10)); /* starts inner: 11 */
    outer_got[1] = coro_yield_value(V(2));          /* main sends 3 */
    outer_got[2] = coro_resume_value(inner, V(20)); /* inner: 12 */
    outer_got[3] = coro_resume_value(inner, V(30)); /* inner returns 13 */
    return V(4);
}

/* ── 4. two threads at once ────────────────────────────────────────────── */

/* Each thread does at least ROUNDS transfers, and goes on until the other
 * has done its ROUNDS too, so that the two run side by side for as long as
 * the slower one needs (no clock involved). */
enum { ROUNDS = 200000 };
static pthread_barrier_t start;
static atomic_int threads_done;

static void *echo_plus_one(void *arg)
{
    void *in = coro_yield_value(NULL);

    (void)arg;
    while (in != NULL)
        in = coro_yield_value(V((uintptr_t)in + 1));
    return NULL;
}

static void *transfer_on_a_thread(void *arg)
{
    uintptr_t base = (uintptr_t)arg, bad = 0;
    coro *c = coro_create(echo_plus_one, NULL, 0);

    pthread_barrier_wait(&start);
    if (c == NULL) {
        atomic_fetch_add(&threads_done, 1); /* the other need not wait */
        return V(ROUNDS);
    }
    coro_resume_value(c, NULL); /* to its first coro_yield_value() */
    for (uintptr_t i = 0; i < ROUNDS || atomic_load(&threads_done) < 2; i++) {
        void *got = coro_resume_value(c, V(base + 2 * (i % ROUNDS)));
        if (got != V(base + 2 * (i % ROUNDS) + 1))
            bad++;
        if (i + 1 == ROUNDS)
            atomic_fetch_add(&threads_done, 1);
    }
    coro_resume_value(c, NULL); /* it returns */
    coro_destroy(c);
    return V(bad);
}

/* ── the cases ────────────────────────────────────────────────────────── */

static void case_outside(void)
{
    void *got;

    errno = 0;
    got = coro_yield_value(V(5));
    expect_error(got, errno, EPERM, "coro_yield_value() outside a coroutine");
}

static void case_running_sum(void)
{
    coro *c = new_coro(running_sum);
    void *got;

    expect(coro_resume_value(c, V(77)), V(0),
           "the first resume, which runs to the first coro_yield_value(0)");
    expect(coro_resume_value(c, V(5)), V(5), "sum after sending 5");
    expect(coro_resume_value(c, V(7)), V(12), "sum after sending 5, 7");
    expect(coro_resume_value(c, V(30)), V(42), "sum after sending 5, 7, 30");
    expect(coro_resume_value(c, NULL), V(1042),
           "the resume in which the function returns (its return value)");
    CHECK(coro_status(c) == CORO_DONE, "running_sum should be DONE");
    errno = 0;
    got = coro_resume_value(c, V(1));
    expect_error(got, errno, EINVAL, "coro_resume_value() of a finished "
                                     "coroutine");
    errno = 0;
    got = coro_resume_value(NULL, V(1));
    expect_error(got, errno, EINVAL, "coro_resume_value(NULL, ...)");
    coro_destroy(c);
}

static void case_pointers(void)
{
    coro *c = new_coro(swap_pointers);
    void *got;

    got = coro_resume_value(c, NULL);
    CHECK(got == local_sent,
          "a pointer to the coroutine's local, %p, came back as %p (is it cut "
          "to an int on the way?)", (void *)local_sent, got);
    expect(coro_resume_value(c, text_in), NULL, "swap_pointers returns NULL");
    CHECK(text_seen == text_in, "the pointer %p sent in arrived as %p",
          (void *)text_in, (void *)text_seen);
    coro_destroy(c);
}

static void case_plain(void)
{
    coro *c = new_coro(mixes_plain_and_valued);
    int err;

    expect(coro_resume_value(c, V(1)), V(7), "coroutine yielded out 7");
    expect(coro_resume_value(c, V(2)), NULL,
           "after a plain coro_yield() (NULL, not an earlier value)");
    err = coro_resume(c); /* to coro_yield_value(8) */
    CHECK(err == 0, "coro_resume returned %d", err);
    err = coro_resume(c); /* coro_yield_value(8) returns: plain resume */
    CHECK(err == 0, "coro_resume returned %d", err);
    expect(seen_after_plain_resume, NULL,
           "coro_yield_value() resumed by a plain coro_resume()");
    expect(coro_resume_value(c, V(3)), NULL,
           "a function that returns NULL: the last resume");
    coro_destroy(c);
}

static void case_nesting(void)
{
    outer = new_coro(outer_body);
    inner = new_coro(inner_body);
    expect(coro_resume_value(outer, V(1)), V(2),
           "nested: outer yields out 2 to main");
    expect_error(outer_busy, outer_busy_err, EBUSY,
                 "nested: inner's coro_resume_value() of outer (NORMAL)");
    expect(outer_got[0], V(11), "nested: inner's first yield, seen by outer");
    expect(coro_resume_value(outer, V(3)), V(4),
           "nested: outer's return value, seen by main");
    expect(outer_got[1], V(3), "nested: main's 3, seen by outer's yield");
    expect(inner_got[0], V(20), "nested: outer's 20, seen by inner's yield");
    expect(outer_got[2], V(12), "nested: inner's second yield, seen by outer");
    expect(inner_got[1], V(30), "nested: outer's 30, seen by inner's yield");
    expect(outer_got[3], V(13), "nested: inner's return value, seen by outer");
    coro_destroy(outer);
    coro_destroy(inner);
}

static void case_two_threads(void)
{
    pthread_t threads[2];
    void *bad[2];

    pthread_barrier_init(&start, NULL, 2);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&threads[i], NULL, transfer_on_a_thread,
                             V(i == 0 ? 2 : 2 + 2 * ROUNDS + 10)) == 0,
              "pthread_create failed");
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], &bad[i]);
    pthread_barrier_destroy(&start);
    CHECK(bad[0] == NULL && bad[1] == NULL,
          "two threads transferring at once: %lu and %lu values came back "
          "wrong, in at least %d transfers each (is the slot shared between "
          "threads?)", N(bad[0]), N(bad[1]), ROUNDS);
}

int main(void)
{
    static const check_case cases[] = {
        {"outside", case_outside},
        {"running sum", case_running_sum},
        {"pointers", case_pointers},
        {"plain", case_plain},
        {"nesting", case_nesting},
        {"two threads", case_two_threads},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
