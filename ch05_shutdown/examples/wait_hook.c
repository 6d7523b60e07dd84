/*
 * wait_hook.c — the pump waits in our own epoll set (coro_sched_set_wait).
 *
 * A coroutine reads lines from a pipe. The pipe is non-blocking: when it
 * is empty the coroutine parks, and the hook — the pump's way of waiting
 * when nothing is ready — waits in epoll_wait() on the pipe and on the
 * scheduler's wake_fd. When the pipe is readable, the hook wakes the
 * reader with coro_wake(). No second thread watches the pipe: readiness
 * becomes a ready coroutine on the pump's own thread.
 *
 * Another thread writes the lines, a little apart, and posts a greeting
 * to the scheduler between them: that post writes the wake_fd, which
 * ends the hook's epoll_wait, so the pump runs it at once. A ticker
 * coroutine sleeps meanwhile, so the hook's deadline is its timer.
 *
 *   ./tools/bazelw run //ch05_shutdown/examples:wait_hook
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "coro.h"

struct app {
    coro_sched *s;
    int epfd;      /* our epoll set: the pipe and the wake_fd */
    int wake_fd;   /* the scheduler's eventfd (the library's: never closed) */
    int pipe_rd;   /* read end, non-blocking */
    int pipe_wr;
    coro *reader;  /* parked while the pipe is empty */
    int waits;     /* how many times the hook blocked */
};

/* The hook: wait in epoll until the deadline, the pipe, or wake_fd. */
static void wait_in_epoll(void *arg, int wake_fd, uint64_t deadline)
{
    struct app *app = arg;
    struct epoll_event events[2];
    uint64_t now = coro_now();
    int timeout, n;

    (void)wake_fd; /* in the set already; the library empties it */
    if (deadline == UINT64_MAX)
        timeout = -1; /* no timer: wait for a descriptor */
    else if (deadline <= now)
        timeout = 0; /* a poll: the pump has work ready */
    else /* rounded up: waking before the deadline would only loop */
        timeout = (int)((deadline - now + CORO_MSEC - 1) / CORO_MSEC);
    if (timeout != 0)
        app->waits++;
    n = epoll_wait(app->epfd, events, 2, timeout);
    for (int i = 0; i < n; i++) {
        if (events[i].data.fd == app->pipe_rd && app->reader != NULL)
            coro_wake(app->reader); /* readiness -> a ready coroutine */
    }
}

static void *reader(void *arg)
{
    struct app *app = arg;
    char buf[128];

    for (;;) {
        ssize_t got = read(app->pipe_rd, buf, sizeof buf - 1);

        if (got > 0) {
            buf[got] = '\0';
            printf("  reader: got %s", buf);
        } else if (got == 0) {
            printf("  reader: end of the pipe\n");
            break;
        } else if (errno == EAGAIN) {
            coro_park(); /* the hook wakes us when it is readable */
        } else {
            perror("read");
            break;
        }
    }
    app->reader = NULL;
    return NULL;
}

static void *ticker(void *arg)
{
    (void)arg;
    for (int i = 1; i <= 3; i++) {
        coro_sleep(40 * CORO_MSEC); /* the hook's deadline */
        printf("  ticker: tick %d\n", i);
    }
    return NULL;
}

static void greet(coro_sched *s, void *arg)
{
    (void)s;
    printf("  post from the writer thread: %s\n", (const char *)arg);
}

static void *writer(void *arg)
{
    struct app *app = arg;
    const char *lines[] = {"one\n", "two\n", "three\n"};

    for (int i = 0; i < 3; i++) {
        usleep(30 * 1000);
        if (write(app->pipe_wr, lines[i], strlen(lines[i])) < 0)
            perror("write");
        if (i == 1)
            coro_post(app->s, greet, "hello"); /* wakes the hook */
    }
    usleep(30 * 1000);
    close(app->pipe_wr); /* the reader sees the end */
    coro_thread_detach();
    return NULL;
}

static int watch(int epfd, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int main(void)
{
    struct app app = {0};
    int fds[2];
    pthread_t thread;
    coro *reader_handle;
    int err;

    app.s = coro_sched_create();
    app.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (app.s == NULL || app.epfd < 0 || pipe2(fds, O_NONBLOCK | O_CLOEXEC)) {
        perror("setup");
        return 1;
    }
    app.pipe_rd = fds[0];
    app.pipe_wr = fds[1];
    err = coro_sched_set_wait(app.s, wait_in_epoll, &app, &app.wake_fd);
    if (err != 0) {
        fprintf(stderr, "coro_sched_set_wait: %s\n", strerror(err));
        return 1;
    }
    if (watch(app.epfd, app.wake_fd) != 0 || watch(app.epfd, app.pipe_rd)) {
        perror("epoll_ctl");
        return 1;
    }
    app.reader = reader_handle = coro_spawn(app.s, reader, &app);
    coro_go(app.s, ticker, NULL);
    pthread_create(&thread, NULL, writer, &app);

    coro_sched_run(app.s); /* until the reader and the ticker are done */

    pthread_join(thread, NULL);
    printf("the hook blocked %d times; no thread watched the pipe\n",
           app.waits);
    coro_destroy(reader_handle);
    close(app.pipe_rd);
    close(app.epfd);
    return coro_sched_destroy(app.s) == 0 ? 0 : 1;
}
