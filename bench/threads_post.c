/*
 * threads_post.c — cross-thread posts: one producer thread coro_post()s
 * items to a scheduler that the consumer thread (the harness's thread)
 * pumps with coro_sched_run(). ns per item; its baseline is
 * threads_queue.c, a mutex + condition-variable queue moving the same
 * items between the same two threads.
 *
 * One round of n items:
 *
 *   consumer (owns s)                        producer thread
 *   keeper = coro_spawn(s, keeper_fn)
 *   tell the producer "n items"   ───────>   for i in 0..n-1:
 *   coro_sched_run(s)                            coro_post(s, on_item, i)
 *     keeper: coro_park() until all arrived      (malloc a post, push it on
 *     each post: on_item(i) checks the order,     s's inbox, futex-wake the
 *     the last one coro_wake()s the keeper        pump if it sleeps)
 *   coro_destroy(keeper)
 *
 * The keeper keeps coro_sched_run() pumping (and sleeping in the inbox's
 * futex when the inbox is empty) until the last item has run; without it,
 * coro_sched_run() would return as soon as nothing is pending. Posts from
 * one thread run in the order they were posted: on_item checks it, and
 * tear-down checks the counts.
 */
#define _GNU_SOURCE
#include "coro.h"
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    coro_sched *s;
    coro *keeper;

    /* Consumer's side (the scheduler's thread only). */
    uint64_t received;     /* items run, in total */
    uint64_t target;       /* received at the end of this round */
    uint64_t out_of_order; /* items that did not come in posting order */

    /* The producer and its orders. */
    pthread_t producer;
    pthread_mutex_t lock;
    pthread_cond_t order;
    uint64_t order_seq;  /* bumped for each order (under lock) */
    uint64_t order_n;    /* items to post for it */
    bool stop;
    uint64_t sent;       /* producer only: items posted, in total */
    _Atomic uint64_t post_errors;
} state;

/* The one state of this process (a post's argument is its number). */
static state the_state;

/* A post: runs on the consumer's pump. */
static void on_item(coro_sched *s, void *arg) {
    state *p = &the_state;
    (void)s;
    if ((uint64_t)(uintptr_t)arg != p->received)
        p->out_of_order++;
    if (++p->received == p->target)
        coro_wake(p->keeper); /* same thread: queues it directly */
}

/* Keeps the pump running until every item of the round has arrived. */
static void *keeper_fn(void *arg) {
    state *p = arg;
    while (p->received < p->target)
        coro_park();
    return NULL;
}

static void *producer_main(void *arg) {
    state *p = arg;
    uint64_t seen = 0;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->order_seq == seen && !p->stop)
            pthread_cond_wait(&p->order, &p->lock);
        if (p->stop)
            break;
        seen = p->order_seq;
        uint64_t n = p->order_n;
        pthread_mutex_unlock(&p->lock);
        /* In locals: `p->s` shares a cache line with `received`, which the
         * consumer writes for every item, and coro_post() is a call the
         * compiler cannot see through, so it would read p->s again for
         * every post: a miss each time, charged to the post. */
        coro_sched *s = p->s;
        uint64_t sent = p->sent;
        for (uint64_t i = 0; i < n; i++) {
            if (coro_post(s, on_item, (void *)(uintptr_t)sent++) != 0)
                atomic_fetch_add(&p->post_errors, 1);
        }
        p->sent = sent;
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static int setup(void *ctx) {
    state *p = ctx;
    p->s = coro_sched_create();
    if (p->s == NULL) {
        perror("post: coro_sched_create");
        return 1;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->order, NULL);
    if (pthread_create(&p->producer, NULL, producer_main, p) != 0) {
        fprintf(stderr, "post: pthread_create failed\n");
        return 1;
    }
    return 0;
}

/* n items from the producer thread through this thread's pump. */
static void move_items(void *ctx, uint64_t n) {
    state *p = ctx;
    p->target = p->received + n;
    p->keeper = coro_spawn(p->s, keeper_fn, p);
    if (p->keeper == NULL)
        abort();
    pthread_mutex_lock(&p->lock);
    p->order_n = n;
    p->order_seq++;
    pthread_cond_signal(&p->order);
    pthread_mutex_unlock(&p->lock);
    if (coro_sched_run(p->s) != 0 || coro_destroy(p->keeper) != 0)
        abort();
}

static int teardown(void *ctx) {
    state *p = ctx;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->order);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->producer, NULL);
    if (p->received != p->sent || p->out_of_order != 0 ||
        atomic_load(&p->post_errors) != 0) {
        fprintf(stderr, "post: sent %llu, received %llu, %llu out of order, "
                "%llu failed posts\n", (unsigned long long)p->sent,
                (unsigned long long)p->received,
                (unsigned long long)p->out_of_order,
                (unsigned long long)atomic_load(&p->post_errors));
        return 1;
    }
    if (coro_sched_destroy(p->s) != 0) {
        fprintf(stderr, "post: coro_sched_destroy failed\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    bench_spec spec = {
        .name = "post",
        .unit = "item",
        .units_per_op = 1,
        .setup = setup,
        .run = move_items,
        .teardown = teardown,
        .ctx = &the_state,
    };
    return bench_main(argc, argv, &spec);
}
