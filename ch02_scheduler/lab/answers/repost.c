/*
 * answers/repost.c — the reference answer to Chapter 2's exercise 4 (see
 * checks/repost.c for what it must do).
 *
 * The post keeps its state in the memory its argument points to, not in
 * statics, so that two schedulers (or two calls) never share a count.
 * Each run makes at most one coro_post(): a post cannot wait, so on a
 * refusal it records the error and stops instead of retrying.
 */
#include "coro.h"

#include <stddef.h>

int repost_ten(coro_sched *s, int *runs);

struct repost {
    int runs;       /* times the post has run */
    int reposts;    /* coro_post() calls it has made */
    int first_error; /* the first one that failed, or 0 */
};

enum { REPOSTS = 10 };

static void repost(coro_sched *s, void *arg)
{
    struct repost *r = arg;
    int err;

    r->runs++;
    if (r->reposts == REPOSTS || r->first_error != 0)
        return;
    r->reposts++;
    err = coro_post(s, repost, r);
    if (err != 0)
        r->first_error = err;
}

int repost_ten(coro_sched *s, int *runs)
{
    struct repost r = {0, 0, 0};
    int err = coro_post(s, repost, &r);

    if (err != 0)
        return err;
    err = coro_sched_run(s);
    *runs = r.runs;
    if (err != 0)
        return err;
    return r.first_error;
}
