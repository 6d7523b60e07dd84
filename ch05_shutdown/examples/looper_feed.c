/*
 * looper_feed.c — one looper, fed by three threads.
 *
 * The looper's thread owns its scheduler. The three producer threads never
 * touch it directly: coro_post() and coro_go() from another thread go
 * through the scheduler's inbox and wake the looper's pump if it sleeps.
 * Every post runs on the looper's thread, one at a time, so the counter it
 * updates needs no lock.
 */
#include <pthread.h>
#include <stdio.h>

#include "coro.h"

enum { PRODUCERS = 3, POSTS_EACH = 1000 };

static long total;                    /* touched only on the looper */
static pthread_t looper_thread;       /* to show where the posts run */
static int posts_on_other_threads;

static void add(coro_sched *s, void *arg)
{
    (void)s;
    if (!pthread_equal(pthread_self(), looper_thread))
        posts_on_other_threads++;
    total += (long)(size_t)arg;
}

static void *note_thread(void *arg)
{
    (void)arg;
    looper_thread = pthread_self(); /* runs first, on the looper */
    return NULL;
}

static void *report(void *arg)
{
    (void)arg;
    coro_sleep(10 * CORO_MSEC); /* a coroutine on the looper can wait too */
    printf("  a coroutine on the looper says hello\n");
    return NULL;
}

static void *producer(void *arg)
{
    coro_sched *s = arg;

    for (long i = 1; i <= POSTS_EACH; i++)
        while (coro_post(s, add, (void *)(size_t)i) != 0)
            continue; /* unlimited scheduler: only ENOMEM could refuse */
    coro_go(s, report, NULL);
    return NULL;
}

int main(void)
{
    coro_looper *l = coro_looper_start("feed-looper");
    pthread_t threads[PRODUCERS];
    coro_sched *s;

    if (l == NULL)
        return 1;
    s = coro_looper_sched(l);
    coro_go(s, note_thread, NULL);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_create(&threads[i], NULL, producer, s);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    coro_looper_stop(l); /* lets every queued post and coroutine finish */
    printf("  total = %ld (expected %ld), posts run elsewhere: %d\n", total,
           (long)PRODUCERS * POSTS_EACH * (POSTS_EACH + 1) / 2,
           posts_on_other_threads);
    return 0;
}
