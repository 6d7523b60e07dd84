/*
 * pool_call.c — keeping a blocking call off the pump.
 *
 * A coroutine that calls a blocking function (read(), a DNS lookup, a
 * database driver) blocks its whole thread: every other coroutine of that
 * scheduler stops too. coro_pool_call() runs the function on a pool
 * worker instead and parks the caller; the pump keeps running the others,
 * and the caller is woken, on its own thread, with the result.
 *
 * Here the "blocking call" reads from a pipe that a helper thread fills
 * after 100 ms. Meanwhile a ticker coroutine on the same scheduler keeps
 * ticking.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coro.h"

static int pipe_fds[2];
static coro_pool *pool;
static int reading = 1;

static void *blocking_read(void *arg)
{
    static char buffer[64];
    ssize_t n = read(pipe_fds[0], buffer, sizeof buffer - 1); /* blocks */

    (void)arg;
    buffer[n > 0 ? n : 0] = '\0';
    return buffer;
}

static void *reader(void *arg)
{
    void *result = NULL;

    (void)arg;
    printf("  reader: calling read() on the pool\n");
    coro_pool_call(pool, blocking_read, NULL, &result);
    printf("  reader: got \"%s\"\n", (const char *)result);
    reading = 0;
    return NULL;
}

static void *ticker(void *arg)
{
    (void)arg;
    for (int tick = 1; reading; tick++) {
        printf("  ticker: tick %d (the pump is free)\n", tick);
        coro_sleep(30 * CORO_MSEC);
    }
    return NULL;
}

static void *writer_thread(void *arg)
{
    const char *message = "hello through the pipe";
    const struct timespec delay = {0, 100 * 1000 * 1000};

    (void)arg;
    nanosleep(&delay, NULL);
    if (write(pipe_fds[1], message, strlen(message)) < 0)
        perror("write");
    return NULL;
}

int main(void)
{
    coro_sched *s = coro_sched_create();
    pthread_t writer;

    pool = coro_pool_create(1, false);
    if (s == NULL || pool == NULL || pipe(pipe_fds) != 0)
        return 1;
    pthread_create(&writer, NULL, writer_thread, NULL);
    coro_go(s, reader, NULL);
    coro_go(s, ticker, NULL);
    coro_sched_run(s); /* parks while the pool works; wakes on its wake */
    pthread_join(writer, NULL);
    coro_pool_wait(pool);
    coro_pool_destroy(pool);
    return coro_sched_destroy(s) == 0 ? 0 : 1;
}
