/*
 * check priority_heap — Chapter 2, exercise 2.
 *
 * The exercise: replace the ready queue's level list (ready.c) with a
 * binary heap keyed by (priority, sequence number), then compare the two
 * with //bench:sched, and with a case of your own whose coroutines are
 * spread over 100 priorities.
 *
 * What you provide: the change to the library in your lab (ready.c, and
 * whatever sched_impl.h, coro_impl.h and sched.c need); no answers/ file
 * and no new function. The public API and the queue's order stay exactly
 * as the lesson's "The idea: a queue and a pump" and "Priorities" state
 * them:
 *   - a higher priority runs first;
 *   - among equal priorities, first in, first out (a heap is not stable
 *     by itself: that is what the sequence number is for);
 *   - posts are queued at priority 0, in the same order as coroutines;
 *   - a new priority applies the next time the coroutine is queued: a
 *     coroutine already waiting keeps its place, so the key must be taken
 *     when the entry is pushed, not read from the coroutine later.
 * The benchmark part of the exercise is measured, not checked.
 *
 * What it verifies: the run order against a model of the queue, over a
 * long random sequence of operations (coro_spawn(), coro_post(),
 * coro_set_priority() on the running coroutine and on queued ones, yields,
 * returns, posts that start more work), with priorities from a few values
 * near 0 to INT_MIN and INT_MAX; and a crowd of 3,000 coroutines over 2,001
 * priorities, to grow the queue. Every entry, when it runs, checks that it
 * is the model's front. The random sequence is fixed (a seed), so a
 * failure repeats. The check passes on the level list too: it checks the
 * order, which both must keep. The random sequence and the crowd are two
 * cases, each run in a child process of its own (a crash or a hang is
 * reported as that case's failure). Prints `check priority_heap: ok` and
 * exits 0, or one `check priority_heap: FAIL: CASE: ...` line per failed
 * case and exits 1.
 */
#define CHECK_NAME "priority_heap"
#include "lab_check.h"

#include <limits.h>
#include <stdint.h>

#include "coro.h"

/* ── Randomness: a fixed sequence ─────────────────────────────────────── */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t rnd(uint32_t n) /* 0 .. n-1 */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static int random_priority(void)
{
    uint32_t r = rnd(100);

    if (r < 60)
        return (int)rnd(5) - 2;    /* a few values near 0: many equals */
    if (r < 95)
        return (int)rnd(101) - 50; /* spread over 101 priorities */
    return r < 97 ? INT_MIN : INT_MAX;
}

/* ── The model: what should run next ──────────────────────────────────── */

enum { MAX_TASKS = 4096, MAX_MODEL = 8192, POST_ID_BASE = 100000 };

struct model_entry {
    int id;        /* a task's index, or POST_ID_BASE + a post's number */
    int priority;  /* as queued */
    uint64_t seq;  /* when queued */
};

static struct model_entry model[MAX_MODEL];
static size_t model_length;
static uint64_t model_seq;
static long runs_checked;

static void model_push(int id, int priority)
{
    if (model_length == MAX_MODEL)
        check_fail("(the check's model is full: a bug in the check)");
    model[model_length].id = id;
    model[model_length].priority = priority;
    model[model_length].seq = model_seq++;
    model_length++;
}

static size_t model_front(void)
{
    size_t best = 0;

    for (size_t i = 1; i < model_length; i++) {
        if (model[i].priority > model[best].priority ||
            (model[i].priority == model[best].priority &&
             model[i].seq < model[best].seq))
            best = i;
    }
    return best;
}

static void describe(char *out, size_t size, int id)
{
    if (id >= POST_ID_BASE)
        snprintf(out, size, "post %d", id - POST_ID_BASE);
    else
        snprintf(out, size, "coroutine %d", id);
}

/* Entry `id` has just started to run: it must be the model's front. */
static void arrive(int id)
{
    size_t front;
    char want[48], got[48];

    if (model_length == 0)
        check_fail("%s ran, but nothing should be queued", id >= POST_ID_BASE
                                                               ? "a post"
                                                               : "a coroutine");
    front = model_front();
    if (model[front].id != id) {
        int got_priority = 0;

        for (size_t i = 0; i < model_length; i++)
            if (model[i].id == id)
                got_priority = model[i].priority;
        describe(want, sizeof want, model[front].id);
        describe(got, sizeof got, id);
        check_fail(
            "after %ld entries ran in order, the pump ran %s (queued at "
            "priority %d) where the queue's order says %s (queued at "
            "priority %d, %s): higher priority first, and first in, first "
            "out among equals (the key is taken when an entry is pushed)",
            runs_checked, got, got_priority, want, model[front].priority,
            got_priority == model[front].priority
                ? "same priority, queued earlier"
                : "the higher priority");
    }
    model[front] = model[--model_length];
    runs_checked++;
}

/* ── Tasks: coroutines doing random things ────────────────────────────── */

struct task {
    int id;
    coro *handle;
    int priority;  /* what coro_set_priority() last gave it */
    bool done;
    bool destroyed;
};

static struct task tasks[MAX_TASKS];
static int task_count;
static int post_count;
static coro_sched *sched;
static long budget; /* operations left for the random phase */

static void *task_body(void *arg);
static void post_body(coro_sched *s, void *arg);

static void spawn_task(void)
{
    struct task *t = NULL;

    for (int i = 0; i < task_count && t == NULL; i++)
        if (tasks[i].destroyed)
            t = &tasks[i]; /* a slot reaped before: reuse it */
    if (t == NULL) {
        if (task_count == MAX_TASKS)
            return;
        t = &tasks[task_count];
        t->id = task_count++;
    }
    t->priority = 0;
    t->done = t->destroyed = false;
    t->handle = coro_spawn(sched, task_body, t);
    if (t->handle == NULL)
        check_fail("coro_spawn() failed");
    model_push(t->id, 0);
}

static void post_one(void)
{
    static int numbers[MAX_MODEL * 4];
    int number = post_count;

    if (post_count == (int)(sizeof numbers / sizeof numbers[0]))
        return;
    numbers[number] = number;
    if (coro_post(sched, post_body, &numbers[number]) != 0)
        check_fail("coro_post() failed");
    post_count++;
    model_push(POST_ID_BASE + number, 0);
}

/* Give a random live task (not `self`) a new priority. If it is queued,
 * it keeps its place: the model's entry is not touched. */
static void reprioritize_other(int self)
{
    int live[64], n = 0;

    for (int tries = 0; tries < 64 && task_count > 0; tries++) {
        int i = (int)rnd((uint32_t)task_count);

        if (i != self && !tasks[i].done && !tasks[i].destroyed)
            live[n++] = i;
    }
    if (n == 0)
        return;
    struct task *t = &tasks[live[rnd((uint32_t)n)]];
    t->priority = random_priority();
    if (coro_set_priority(t->handle, t->priority) != 0)
        check_fail("coro_set_priority() of a queued coroutine failed");
}

static bool model_full(void)
{
    return model_length > 600;
}

static void random_side_work(int self)
{
    uint32_t r = rnd(100);

    if (r < 30 && !model_full())
        spawn_task();
    else if (r < 60 && !model_full())
        post_one();
    else
        reprioritize_other(self);
}

static void *task_body(void *arg)
{
    struct task *self = arg;

    arrive(self->id);
    for (;;) {
        uint32_t r = rnd(100);

        budget--;
        if (r < 45 || (budget > 0 && r < 88 && model_length < 3)) {
            if (rnd(3) == 0) {
                self->priority = random_priority();
                if (coro_set_priority(coro_self(), self->priority) != 0)
                    check_fail("coro_set_priority(coro_self(), ...) failed");
            }
            if (coro_priority(coro_self()) != self->priority)
                check_fail("coro_priority() says %d, not %d as last set",
                           coro_priority(coro_self()), self->priority);
            model_push(self->id, self->priority); /* the pump requeues it */
            if (coro_yield() != 0)
                check_fail("coro_yield() in a scheduled coroutine failed");
            arrive(self->id);
        } else if (r < 88 && budget > 0) {
            random_side_work(self->id);
        } else {
            self->done = true;
            return NULL;
        }
    }
}

static void post_body(coro_sched *s, void *arg)
{
    int number = *(int *)arg;

    if (s != sched)
        check_fail("a post was called with another scheduler");
    arrive(POST_ID_BASE + number);
    budget--;
    if (budget > 0 && rnd(2) == 0)
        random_side_work(-1);
}

static void reap(void)
{
    for (int i = 0; i < task_count; i++) {
        struct task *t = &tasks[i];

        if (t->done && !t->destroyed) {
            if (coro_status(t->handle) != CORO_DONE)
                check_fail("a coroutine that returned is not CORO_DONE");
            if (coro_destroy(t->handle) != 0)
                check_fail("coro_destroy() of a finished coroutine failed");
            t->destroyed = true;
        }
    }
}

static void random_operations(void)
{
    sched = coro_sched_create();
    if (sched == NULL)
        check_fail("coro_sched_create() returned NULL");
    if (coro_sched_set_stack_size(sched, 16 * 1024) != 0)
        check_fail("coro_sched_set_stack_size() failed");
    budget = 200000;
    while (budget > 0) {
        uint32_t r = rnd(100);

        if (r < 15 && !model_full()) {
            spawn_task();
        } else if (r < 25 && !model_full()) {
            post_one();
        } else if (r < 35) {
            reprioritize_other(-1);
        } else {
            if (!coro_sched_step(sched) && model_length > 0)
                check_fail(
                    "coro_sched_step() ran nothing with %zu entries queued",
                    model_length);
            budget--;
            if (rnd(8) == 0)
                reap();
        }
    }
    if (coro_sched_run(sched) != 0)
        check_fail("coro_sched_run() failed");
    if (model_length != 0)
        check_fail("coro_sched_run() returned with %zu entries the model still "
                   "has queued", model_length);
    reap();
    if (coro_sched_step(sched))
        check_fail("coro_sched_step() ran something on an empty queue");
    if (coro_sched_destroy(sched) != 0)
        check_fail("coro_sched_destroy() failed");
    printf("priority_heap: %ld entries ran in the model's order\n",
           runs_checked);
}

/* ── A crowd over 2,001 priorities ────────────────────────────────────── */

static int crowd_order[3000];

static int crowd_priority(int i)
{
    return -1 - (i * 7919) % 2001;
}
static int crowd_ran;

static void *crowd_body(void *arg)
{
    int i = (int)(intptr_t)arg;

    /* First run, at priority 0: take a priority from -2001 to -1, below
     * every first run, and wait behind everything that yielded at it
     * before. */
    coro_set_priority(coro_self(), crowd_priority(i));
    coro_yield();
    crowd_order[crowd_ran++] = i;
    return NULL;
}

static void crowd(void)
{
    coro_sched *s = coro_sched_create();

    if (s == NULL)
        check_fail("coro_sched_create() returned NULL");
    if (coro_sched_set_stack_size(s, 16 * 1024) != 0)
        check_fail("coro_sched_set_stack_size() failed");
    for (int i = 0; i < 3000; i++)
        if (coro_go(s, crowd_body, (void *)(intptr_t)i) != 0)
            check_fail("coro_go() failed");
    if (coro_sched_run(s) != 0)
        check_fail("coro_sched_run() failed");
    if (crowd_ran != 3000)
        check_fail("%d of a crowd of 3,000 ran their second turn", crowd_ran);
    for (int k = 1; k < 3000; k++) {
        int a = crowd_order[k - 1], b = crowd_order[k];
        int pa = crowd_priority(a), pb = crowd_priority(b);

        if (pa < pb || (pa == pb && a > b))
            check_fail("a crowd of 3,000 over 2,001 priorities: coroutine %d "
                       "(priority %d) ran before coroutine %d (priority %d)%s",
                       a, pa, b, pb,
                       pa == pb ? ", which yielded first at that priority"
                                : "");
    }
    if (coro_sched_destroy(s) != 0)
        check_fail("coro_sched_destroy() failed");
}

int main(void)
{
    static const check_case cases[] = {
        {"random operations", random_operations},
        {"crowd", crowd},
    };

    return check_main(cases, sizeof cases / sizeof cases[0]);
}
