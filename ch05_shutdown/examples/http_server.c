/*
 * http_server.c — the capstone: an HTTP/1.1 server that stops without
 * losing a request.
 *
 *   http_server [port] [grace_ms]      (defaults: 0 = any free port, 5000)
 *   http_server --demo                 (the tour: serve a client of its own,
 *                                       then stop itself with SIGTERM)
 *
 * It listens on 127.0.0.1 only (an example should not open a port to the
 * network) and prints `listening on port N`. `GET /` answers `hello`, any
 * other path 404; HEAD is answered too, and the target may also be in
 * absolute form (`GET http://host/`). Every answer carries `Date`.
 * Connections are kept alive (HTTP/1.0 only with `Connection: keep-alive`),
 * and pipelined requests are answered in order, with a yield between two
 * of them so that a client that pipelines without pause cannot keep the
 * pump from the others. This server takes no request bodies: another
 * method is a 405, a request announcing a body a 400, and both close the
 * connection (the body would still be on its way). A malformed request is
 * a 400 — at the first byte that cannot belong to a request line, so a
 * TLS handshake or binary noise is refused at once — and a header block
 * over 8 KiB a 431; each closes the connection too. Out of descriptors,
 * it logs one line a second on stderr and refuses the clients it cannot
 * take (a spare descriptor accepts and closes them).
 *
 * One scheduler on the main thread runs everything, on that one thread: an
 * acceptor coroutine and one coroutine per connection, each written as
 * plain sequential code over non-blocking sockets. When a socket would
 * block, its coroutine parks. The pump, when it would sleep, waits in our
 * epoll set instead (coro_sched_set_wait()), and turns readiness into
 * wakes itself:
 *
 *   main thread: the pump
 *   ─────────────────────
 *   run the coroutines that are ready, one turn   (each: recv/send until
 *        │                                         EAGAIN, then park)
 *        v
 *   wait_for_sockets(): epoll_wait(every socket + the scheduler's wake_fd)
 *        timeout: 0 if coroutines are ready (a poll),
 *                 else until the next timer (an I/O timeout)
 *        for each ready socket: coro_wake() its coroutine
 *        │
 *        └──> back to the top
 *
 * No second thread, no handing over between threads: a readiness event
 * costs one coro_wake() on the thread that will run the coroutine.
 *
 * SIGTERM or SIGINT closes the scheduler (coro_sched_close_on_signal()), and
 * every coroutine is cancelled: from then on it can no longer park. Each one
 * decides what that means for it:
 *
 *   acceptor                       stops accepting; the listening socket
 *                                  closes (connections still in the
 *                                  kernel's queue are refused).
 *   connection between requests    one last non-blocking read, in case a
 *                                  request arrived just before the signal;
 *                                  if nothing came, it closes.
 *   connection with a request in   finishes it — and the requests that
 *   flight (bytes of it received,  had arrived behind it when it noticed
 *   or its answer being written)   the close, no more — answers the last
 *                                  with `Connection: close`, then closes.
 *                                  It cannot park any more, so it waits in
 *                                  drain_wait(): once every coroutine
 *                                  left waits there, the pump sleeps in
 *                                  poll() on their sockets. A client too
 *                                  slow within the grace period (nine
 *                                  tenths of it) is dropped.
 *
 * main then drains the scheduler with coro_sched_shutdown(), prints what
 * coro_sched_stats() says, and exits 0 within the grace period. Each
 * connection's socket is closed by a cleanup (coro_defer()), so even a
 * coroutine the shutdown has to abandon releases its socket.
 */
#define _GNU_SOURCE /* accept4() */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coro.h"
#include "http_parse.h"

enum {
    FIRST_INPUT_BYTES = 1024,     /* a connection's first input buffer */
    MAX_HEADER_BYTES = 8 * 1024,  /* a longer request head is answered 431 */
    OUT_BUFFER_BYTES = 4 * 1024,  /* answers queued before one send() */
    MAX_RESPONSE_BYTES = 512,     /* the longest answer this server writes */
    MAX_EVENTS = 256,             /* readiness events per epoll_wait() */
    DEFAULT_GRACE_MS = 5000,
    MAX_GRACE_MS = 3600 * 1000,
};

/* A client silent (or not reading) for this long is dropped. */
#define IO_TIMEOUT (60 * CORO_SEC)
/* After our last answer, how long we wait for the client to close. */
#define LINGER_TIMEOUT (2 * CORO_SEC)

/* ------------------------------------------------------------------------
 * State. All of it is touched by the main thread alone: the pump runs the
 * coroutines and the wait hook there, one at a time, so none of it needs
 * a lock.
 */

static coro_sched *sched;
static int epoll_fd = -1;

/* Who waits on each socket, indexed by file descriptor; NULL: nobody. */
static coro **watchers;
static size_t watcher_slots; /* the process's descriptor limit */

/* A descriptor kept open for the moment the others run out (see
 * refuse_one_connection()). */
static int spare_fd = -1;
static bool failed; /* the acceptor gave up: exit 1 */
static uint64_t grace_ns;
static uint64_t drain_deadline_ns; /* set when the first coroutine sees the close */

static struct {
    unsigned long open;                /* connections open now */
    unsigned long connections;         /* accepted */
    unsigned long requests;            /* answered */
    unsigned long requests_after_close;
    unsigned long idle_closed;         /* idle connections closed by the close */
    unsigned long refused;             /* closed unanswered: out of descriptors */
} counters;

/* ------------------------------------------------------------------------
 * Readiness: the pump waits in epoll, and wakes the coroutines itself.
 *
 * The pump calls wait_for_sockets() (the scheduler's wait hook) whenever
 * it would sleep, with the time of the next timer as its deadline, and
 * once per turn while coroutines are ready, with a deadline that has
 * passed (a poll: epoll_wait() with timeout 0). So a connection whose
 * socket became ready is woken within one turn of the pump even when
 * other coroutines keep it busy, and an idle server sleeps in
 * epoll_wait(). The scheduler's own wake_fd is in the set too: it becomes
 * readable when a signal of coro_sched_close_on_signal() asks for the
 * close, so the close is not kept waiting for a socket or a timer.
 *
 * The lifetime invariant. A coroutine of coro_go() is freed as soon as it
 * returns, so coro_wake() on one that might have returned is a
 * use-after-free. Hence:
 *
 *   - watchers[fd] is set by the socket's coroutine when it starts
 *     watching (watch()) and cleared by its cleanup (coro_defer()), which
 *     runs when it finishes or is abandoned, before it is freed. The
 *     cleanup also takes the socket out of the epoll set (unwatch()),
 *     before closing it.
 *   - The hook runs on the pump's stack, between two coroutines: while it
 *     runs, no coroutine can finish. So every event of one epoll_wait()
 *     names a socket still in the set, and a non-NULL watcher is a live
 *     coroutine: each event can be delivered at once, no stale event can
 *     reach a reused descriptor's new coroutine.
 *
 * Sockets are registered edge-triggered for input and output at once: one
 * event per change of readiness, never repeated while the socket stays
 * readable, so a connection busy with a long answer is not reported again
 * and again. The price is the edge-triggered rule: read or write until
 * EAGAIN before parking. A wake that comes between the EAGAIN and the park
 * is not lost: coro_wake() leaves a permit, and the park returns at once.
 */

/* The epoll_wait() timeout for a coro_now() deadline (UINT64_MAX: none),
 * in milliseconds, rounded up: waking before the deadline would only
 * bring the pump back here. */
static int timeout_ms(uint64_t deadline)
{
    uint64_t now, ms;

    if (deadline == UINT64_MAX)
        return -1;
    now = coro_now();
    if (deadline <= now)
        return 0;
    ms = (deadline - now + CORO_MSEC - 1) / CORO_MSEC;
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* The wait hook: runs on the pump, between coroutines. */
static void wait_for_sockets(void *arg, int scheduler_wake_fd, uint64_t deadline)
{
    struct epoll_event events[MAX_EVENTS];
    int n;

    (void)arg;
    n = epoll_wait(epoll_fd, events, MAX_EVENTS, timeout_ms(deadline));
    /* n < 0: EINTR (a signal). The pump looks again, and calls us again. */
    for (int i = 0; i < n; i++) {
        int fd = events[i].data.fd;

        /* The scheduler's wake_fd is in the set too; the library empties
         * it. */
        if (fd != scheduler_wake_fd && watchers[fd] != NULL)
            coro_wake(watchers[fd]);
    }
}

/* Wait in our epoll set instead of sleeping: see above. */
static int readiness_start(coro_sched *s)
{
    struct epoll_event ev = {.events = EPOLLIN};
    int wake_fd; /* the scheduler's: never closed (coro_sched_set_wait()) */
    int err;

    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0)
        return errno;
    err = coro_sched_set_wait(s, wait_for_sockets, NULL, &wake_fd);
    if (err != 0)
        return err;
    ev.data.fd = wake_fd;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0)
        return errno;
    return 0;
}

/* After the shutdown: the pump sleeps on its own again. */
static void readiness_stop(coro_sched *s)
{
    coro_sched_set_wait(s, NULL, NULL, NULL);
    close(epoll_fd);
}

/* Start delivering readiness of `fd` to the running coroutine. */
static int watch(int fd)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};

    if ((size_t)fd >= watcher_slots)
        return EMFILE; /* cannot happen: the table covers the fd limit */
    ev.data.fd = fd;
    watchers[fd] = coro_self();
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        watchers[fd] = NULL;
        return errno;
    }
    return 0;
}

/* Stop it, before `fd` is closed. From here on no wake for `fd` reaches
 * its old coroutine. */
static void unwatch(int fd)
{
    watchers[fd] = NULL;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, NULL);
}

/* ------------------------------------------------------------------------
 * A connection, and waiting for its socket before and after the close.
 */

/*
 * A connection's buffers are sized to what it needs, and given back while
 * it has nothing in them: a keep-alive client between two requests costs
 * its coroutine and this struct, not a buffer it is not using. The input
 * buffer starts at FIRST_INPUT_BYTES, which holds any ordinary request
 * head, and doubles, up to MAX_HEADER_BYTES, only for a head that does not
 * fit. The output buffer (OUT_BUFFER_BYTES, room for the answers to a
 * batch of pipelined requests) exists while answers wait to be sent.
 */
struct conn {
    int fd;
    char *in;       /* NULL, or in_size bytes */
    size_t in_size;
    size_t in_len;  /* bytes received and not yet consumed */
    char *out;      /* NULL, or OUT_BUFFER_BYTES */
    size_t out_len; /* bytes of answers queued and not yet sent */
    /* The last recv() was short: it took every byte the socket had, so
     * the next byte will come with a readiness edge of its own, and a
     * recv() now would only say EAGAIN. Skipping that recv() saves a
     * system call per request (the same rule as nginx's). */
    bool drained;
    /* After the close (see note_close()): */
    bool noticed_close;
    size_t arrived_at_close; /* bytes of requests that had arrived then */
    bool waited; /* it waited for its socket since the last request */
    /* While it waits in drain_wait(): */
    short wait_events;       /* POLLIN or POLLOUT; 0 when not waiting */
    uint64_t wait_deadline;
    struct conn *prev, *next; /* in the list of open connections */
};

/* Every open connection, for drain_wait(); main thread only. */
static struct conn *open_conns;
/* How many coroutines wait in drain_wait() now. */
static size_t drain_waiting;

/* Cancelled coroutines get until here to finish: nine tenths of the grace
 * period, counted from the first one to notice. The last tenth is main's
 * margin for cleanups and the report. */
static uint64_t drain_deadline(void)
{
    if (drain_deadline_ns == 0)
        drain_deadline_ns = coro_now() + grace_ns - grace_ns / 10;
    return drain_deadline_ns;
}

/*
 * Every coroutine still alive waits in drain_wait(): none of them can do
 * anything until one of their sockets is ready. So the pump may block
 * here, in poll(), on all of their sockets at once, until the first is
 * ready or the nearest deadline. Nothing else can need the pump then: no
 * other coroutine is alive, timers no longer hold anyone (a cancelled
 * sleep returns at once), and the wait hook is only ever asked to poll
 * (this coroutine is ready), so its epoll set would not do: its edges are
 * spent already. poll() is level-triggered: it sees a socket that is
 * readable now, whenever it became so.
 */
static void sleep_until_a_waiter_is_ready(void)
{
    struct pollfd *fds = malloc(drain_waiting * sizeof *fds);
    uint64_t deadline = UINT64_MAX;
    nfds_t count = 0;

    if (fds == NULL)
        return; /* no memory: the waiters yield and retry, spinning */
    for (struct conn *c = open_conns; c != NULL; c = c->next) {
        if (c->wait_events == 0 || count == drain_waiting)
            continue;
        fds[count++] = (struct pollfd){.fd = c->fd, .events = c->wait_events};
        if (c->wait_deadline < deadline)
            deadline = c->wait_deadline;
    }
    poll(fds, count, timeout_ms(deadline)); /* EINTR (a signal): retried */
    free(fds);
}

/*
 * After the close a coroutine cannot park: every park returns ECANCELED at
 * once. Retrying the I/O in a loop of yields would spin the pump at 100%
 * CPU for the whole grace period, for nothing. Instead the coroutine
 * notes what it waits for and yields; the last one to arrive, when every
 * alive coroutine waits, sleeps in poll() for them all. Returns 0 to
 * retry the I/O, or ETIMEDOUT once the drain deadline (or `deadline`) has
 * passed.
 */
static int drain_wait(struct conn *c, short events, uint64_t deadline)
{
    if (deadline > drain_deadline())
        deadline = drain_deadline();
    if (coro_now() >= deadline)
        return ETIMEDOUT;
    c->wait_events = events;
    c->wait_deadline = deadline;
    drain_waiting++;
    if (drain_waiting == coro_sched_alive(sched))
        sleep_until_a_waiter_is_ready();
    coro_yield(); /* returns ECANCELED, after the others ran */
    drain_waiting--;
    c->wait_events = 0;
    return 0;
}

/*
 * The socket said EAGAIN: wait until it may be ready for `events` (POLLIN
 * or POLLOUT), or `deadline`. Returns 0 to retry the I/O, or ETIMEDOUT to
 * give up on the connection. Before the close the wait hook's wake ends
 * the park; after it, drain_wait() does the waiting.
 */
static int wait_for_socket(struct conn *c, short events, uint64_t deadline)
{
    int rc = coro_park_until(deadline);

    c->waited = true; /* the pump ran the others meanwhile */
    if (rc != ECANCELED)
        return rc; /* 0: woken by wait_for_sockets(); or ETIMEDOUT */
    return drain_wait(c, events, deadline);
}

/* ------------------------------------------------------------------------
 * A connection's I/O, which waits like blocking I/O would.
 */

static void consume_input(struct conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->in_len - n);
    c->in_len -= n;
}

/* Room for at least one more byte of input, if the head may still grow:
 * the buffer is allocated, or doubled. False: out of memory. */
static bool make_input_room(struct conn *c)
{
    size_t size = c->in_size == 0 ? FIRST_INPUT_BYTES : 2 * c->in_size;
    char *in;

    if (c->in_len < c->in_size)
        return true;
    if (size > MAX_HEADER_BYTES)
        size = MAX_HEADER_BYTES; /* callers check in_len < MAX_HEADER_BYTES */
    in = realloc(c->in, size);
    if (in == NULL)
        return false;
    c->in = in;
    c->in_size = size;
    return true;
}

/* Before a wait: give back the buffers that hold nothing. */
static void release_empty_buffers(struct conn *c)
{
    if (c->in_len == 0) {
        free(c->in);
        c->in = NULL;
        c->in_size = 0;
    }
    if (c->out_len == 0) {
        free(c->out);
        c->out = NULL;
    }
}

/* The deadline of an I/O that has to wait: IO_TIMEOUT after its first
 * wait. `*deadline` is 0 until then. */
static uint64_t io_deadline(uint64_t *deadline)
{
    if (*deadline == 0)
        *deadline = coro_now() + IO_TIMEOUT;
    return *deadline;
}

/* Send every queued byte. False if the connection is lost or too slow. */
static bool flush_output(struct conn *c)
{
    uint64_t deadline = 0; /* read the clock only if we must wait */
    size_t sent = 0;

    while (sent < c->out_len) {
        ssize_t n = send(c->fd, c->out + sent, c->out_len - sent, MSG_NOSIGNAL);

        if (n >= 0)
            sent += (size_t)n;
        else if (errno == EINTR)
            continue;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            return false;
        else if (wait_for_socket(c, POLLOUT, io_deadline(&deadline)) != 0)
            return false;
    }
    c->out_len = 0;
    return true;
}

/* Empty lines before a request line are ignored (RFC 9112, section 2.2). */
static void skip_blank_lines(struct conn *c)
{
    size_t skip = 0;
    size_t one;

    while (http_line_end(c->in + skip, c->in + c->in_len, &one))
        skip += one;
    if (skip > 0)
        consume_input(c, skip);
}

enum input {
    INPUT_REQUEST,   /* a whole request head is buffered */
    INPUT_NOT_HTTP,  /* what came cannot be the start of a request */
    INPUT_TOO_LARGE, /* the buffer is full and the head is not complete */
    INPUT_IDLE_AT_CLOSE, /* cancelled between two requests */
    INPUT_GONE,      /* closed by the client, failed, or timed out */
};

/* Read until a whole request head is buffered. Answers queued so far are
 * sent first: nothing is owed to the client while we wait for it. */
static enum input read_request_head(struct conn *c, size_t *length)
{
    uint64_t deadline = 0; /* read the clock only if we must wait */

    for (;;) {
        bool canceled;
        ssize_t n;

        if (c->in_len > 0) { /* else there may be no buffer at all */
            skip_blank_lines(c);
            *length = http_head_length(c->in, c->in_len);
            if (*length > 0)
                return INPUT_REQUEST;
            if (!http_could_be_request(c->in, c->in_len))
                return INPUT_NOT_HTTP; /* at once, not at an empty line */
        }
        if (c->in_len == MAX_HEADER_BYTES)
            return INPUT_TOO_LARGE;
        if (!flush_output(c) || !make_input_room(c))
            return INPUT_GONE;
        canceled = coro_canceled(); /* asked before the recv(): see below */
        if (!c->drained || canceled) {
            size_t room = c->in_size - c->in_len;

            n = recv(c->fd, c->in + c->in_len, room, 0);
            if (n > 0) {
                c->in_len += (size_t)n;
                c->drained = (size_t)n < room;
                continue;
            }
            if (n == 0)
                return INPUT_GONE; /* a partial request dies with the client */
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return INPUT_GONE;
            /* Nothing to read, no request begun, and this recv() came
             * after we knew of the cancellation — so after the signal: a
             * request the client sent before it would have been here. */
            if (c->in_len == 0 && canceled)
                return INPUT_IDLE_AT_CLOSE;
        }
        c->drained = false; /* after the wait, read again */
        release_empty_buffers(c); /* idle between requests: the usual case */
        if (wait_for_socket(c, POLLIN, io_deadline(&deadline)) != 0)
            return INPUT_GONE;
    }
}

/*
 * After the close a connection answers the requests that had already
 * arrived when it noticed the close (they were in flight), and no more:
 * a client that pipelines without pause would otherwise keep it open past
 * the grace period. So, the first time the connection sees that it is
 * cancelled, it counts the bytes it has buffered plus those waiting in
 * the socket (FIONREAD). Each request consumed is taken off that count;
 * the request that reaches it, or the drain deadline, is answered with
 * "Connection: close".
 */
static void note_close(struct conn *c)
{
    int queued = 0;

    if (c->noticed_close)
        return;
    c->noticed_close = true;
    if (ioctl(c->fd, FIONREAD, &queued) != 0 || queued < 0)
        queued = 0;
    c->arrived_at_close = c->in_len + (size_t)queued;
}

/* The request of `length` bytes at the front of the input is consumed:
 * after the close, may another one follow it? */
static bool more_requests_after_close(struct conn *c, size_t length)
{
    note_close(c);
    c->arrived_at_close -= length < c->arrived_at_close ? length : c->arrived_at_close;
    return c->arrived_at_close > 0 && coro_now() < drain_deadline();
}

/* ------------------------------------------------------------------------
 * Answering.
 */

struct status {
    int code;
    const char *reason;
    const char *body;
};

static const struct status statuses[] = {
    {200, "OK", "hello\n"},
    {400, "Bad Request", "bad request\n"},
    {404, "Not Found", "not found\n"},
    {405, "Method Not Allowed", "method not allowed\n"},
    {431, "Request Header Fields Too Large", "request header too large\n"},
    {505, "HTTP Version Not Supported", "HTTP version not supported\n"},
};

static const struct status *find_status(int code)
{
    size_t count = sizeof statuses / sizeof statuses[0];

    for (size_t i = 0; i < count; i++)
        if (statuses[i].code == code)
            return &statuses[i];
    return &statuses[1]; /* not reached: every code we answer is listed */
}

/*
 * The Date header's value: the time of the answer in the one format a
 * server may send, IMF-fixdate ("Tue, 01 Dec 2026 15:00:00 GMT", RFC 9110,
 * section 5.6.7), which every answer must carry (section 6.6.1). It
 * changes once a second, so it is formatted once a second. The names are
 * spelled out here: strftime() would follow the locale.
 */
static const char *http_date(void)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static char text[64];
    static time_t formatted = -1;
    time_t now = time(NULL);
    struct tm tm;

    if (now != formatted && gmtime_r(&now, &tm) != NULL) {
        snprintf(text, sizeof text, "%s, %02d %s %04d %02d:%02d:%02d GMT",
                 days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
                 tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
        formatted = now;
    }
    return text;
}

/* Append `text` at `at`; returns the end of what was written. */
static char *append(char *at, const char *text)
{
    size_t length = strlen(text);

    memcpy(at, text, length);
    return at + length;
}

/* Append `n` in decimal. */
static char *append_number(char *at, size_t n)
{
    char digits[24];
    size_t count = 0;

    do {
        digits[count++] = (char)('0' + n % 10);
        n /= 10;
    } while (n > 0);
    while (count > 0)
        *at++ = digits[--count];
    return at;
}

/*
 * Queue the answer; it is sent before the next wait for input. Written
 * piece by piece rather than with snprintf(): this runs once per request,
 * and snprintf(), which parses its format string every call, was 8% of the
 * server's CPU time under wrk (a quarter of what it spends outside the
 * kernel). Every piece is one of this file's
 * constants, the date (29 bytes) or a number, so an answer is never near
 * MAX_RESPONSE_BYTES (the longest, a 431, is under 250 bytes).
 */
static bool queue_response(struct conn *c, const struct request *req)
{
    const struct status *st = find_status(req->status);
    char *at;

    if (c->out == NULL && (c->out = malloc(OUT_BUFFER_BYTES)) == NULL)
        return false;
    if (OUT_BUFFER_BYTES - c->out_len < MAX_RESPONSE_BYTES && !flush_output(c))
        return false;
    at = c->out + c->out_len;
    at = append(at, "HTTP/1.1 ");
    at = append_number(at, (size_t)st->code);
    at = append(at, " ");
    at = append(at, st->reason);
    at = append(at, "\r\nDate: ");
    at = append(at, http_date());
    at = append(at, "\r\nContent-Type: text/plain\r\nContent-Length: ");
    at = append_number(at, strlen(st->body));
    at = append(at, "\r\n");
    if (st->code == 405)
        at = append(at, "Allow: GET, HEAD\r\n");
    at = append(at, req->keep_alive ? "Connection: keep-alive\r\n\r\n"
                                    : "Connection: close\r\n\r\n");
    if (!req->head)
        at = append(at, st->body);
    c->out_len = (size_t)(at - c->out);
    return true;
}

enum next {
    NEXT_REQUEST,     /* keep the connection */
    NEXT_LINGER,      /* answered with "Connection: close": close politely */
    NEXT_CLOSE,       /* nothing more to say: just close */
};

static enum next serve_one_request(struct conn *c)
{
    struct request req = {.status = 431};
    size_t length;

    switch (read_request_head(c, &length)) {
    case INPUT_REQUEST:
        req = http_parse_request(c->in, length);
        if (req.keep_alive && coro_canceled())
            req.keep_alive = more_requests_after_close(c, length);
        consume_input(c, length);
        break;
    case INPUT_NOT_HTTP:
        req.status = 400; /* and the rest is discarded while we linger */
        break;
    case INPUT_TOO_LARGE:
        break; /* the rest of the head is discarded while we linger */
    case INPUT_IDLE_AT_CLOSE:
        counters.idle_closed++;
        return NEXT_CLOSE;
    case INPUT_GONE:
        return NEXT_CLOSE;
    }
    if (!queue_response(c, &req))
        return NEXT_CLOSE;
    counters.requests++;
    if (coro_canceled())
        counters.requests_after_close++;
    return req.keep_alive ? NEXT_REQUEST : NEXT_LINGER;
}

/*
 * Send the last answers, close our half, and read (discarding) until the
 * client closes its half. Closing a socket with unread input makes the
 * kernel reset the connection, and a reset can destroy the answer before
 * the client has read it: the "lingering close" of RFC 9112, section 9.6.
 */
static void close_politely(struct conn *c)
{
    uint64_t deadline = coro_now() + LINGER_TIMEOUT;

    if (!flush_output(c))
        return;
    shutdown(c->fd, SHUT_WR);
    c->in_len = 0; /* what is left of the input is discarded too */
    if (!make_input_room(c))
        return;
    for (;;) {
        ssize_t n = recv(c->fd, c->in, c->in_size, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0) {
            /* Discarded. A client that never stops sending never makes
             * us wait, so the deadlines are checked here too, and the
             * others get a turn between two chunks. */
            coro_yield();
            if (coro_now() >= deadline ||
                (coro_canceled() && coro_now() >= drain_deadline()))
                return;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
            wait_for_socket(c, POLLIN, deadline) != 0)
            return;
    }
}

/* The cleanup: runs when the coroutine returns, or when the shutdown
 * abandons it (then on main's stack, the coroutine never resumed). */
static void release_connection(void *arg)
{
    struct conn *c = arg;

    unwatch(c->fd);
    close(c->fd);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        open_conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    free(c->in);
    free(c->out);
    free(c);
    counters.open--;
}

/* The coroutine of one connection. */
static void *serve_connection(void *arg)
{
    struct conn *c = arg;
    enum next next;

    if (coro_defer(release_connection, c) != 0) {
        release_connection(c); /* not registered (ENOMEM): release now */
        return NULL;
    }
    if (watch(c->fd) != 0)
        return NULL;
    /* Between two requests, the others get their turn. A client that
     * pipelines without pause never makes us wait for its socket, so
     * without this yield it would keep the pump for as long as it sends,
     * and every other client would wait (cooperative scheduling is fair
     * only if each coroutine gives the pump back). A request we had to
     * wait for gave the pump back already, in the wait: then no yield is
     * needed, and the common case (one request, then a wait for the
     * next) costs no extra switch. */
    for (;;) {
        c->waited = false;
        next = serve_one_request(c);
        if (next != NEXT_REQUEST)
            break;
        if (!c->waited)
            coro_yield(); /* after the close: ECANCELED, but it yielded too */
    }
    if (next == NEXT_LINGER)
        close_politely(c);
    return NULL; /* release_connection() runs now */
}

static void start_connection(int fd)
{
    struct conn *c = malloc(sizeof *c);
    int one = 1;

    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->in = NULL;
    c->in_size = 0;
    c->in_len = 0;
    c->out = NULL;
    c->out_len = 0;
    c->drained = false;
    c->waited = false;
    c->noticed_close = false;
    c->arrived_at_close = 0;
    c->wait_events = 0;
    c->wait_deadline = 0;
    /* An answer is one send(): never hold it back waiting for an ACK. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (coro_go(coro_sched_self(), serve_connection, c) != 0) {
        close(fd); /* ESHUTDOWN (closed meanwhile) or ENOMEM: refuse */
        free(c);
        return;
    }
    c->prev = NULL;
    c->next = open_conns;
    if (open_conns != NULL)
        open_conns->prev = c;
    open_conns = c;
    counters.connections++;
    counters.open++; /* until release_connection() */
}

/* ------------------------------------------------------------------------
 * The acceptor, and the program.
 */

static void stop_listening(void *arg)
{
    int fd = *(int *)arg;

    unwatch(fd);
    close(fd);
}

/* Without its acceptor the server is useless: close the scheduler, so
 * that main shuts down (and exits 1). */
static void *give_up(const char *why)
{
    perror(why);
    failed = true;
    coro_sched_close(coro_sched_self());
    return NULL;
}

/*
 * Out of descriptors (EMFILE, or ENFILE for the whole system): the client
 * waits in the kernel's queue, and no new readiness edge will come for it,
 * so it would hang unseen. The classic way out: a spare descriptor, kept
 * open for this moment. Close it, accept the client with the descriptor
 * it frees, close the client at once (it sees its connection end,
 * unanswered, instead of hanging), and open the spare again. The
 * connections already accepted are served all along. Says so on stderr,
 * at most once a second (a flood of clients must not become a flood of
 * log lines). False if no client could be refused that way.
 */
static bool refuse_one_connection(int listen_fd, int err)
{
    static uint64_t last_logged;
    static unsigned long refused_at_last_log;
    uint64_t now = coro_now();
    int fd = -1;

    if (spare_fd >= 0) {
        close(spare_fd);
        fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            counters.refused++;
        }
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    /* Logged when a client was refused, or could not be (no spare). */
    if ((fd >= 0 || spare_fd < 0) &&
        (last_logged == 0 || now - last_logged >= CORO_SEC)) {
        fprintf(stderr,
                "http_server: out of file descriptors (%s): %lu connections "
                "open, new ones refused (%lu since the last line)\n",
                strerror(err), counters.open,
                counters.refused - refused_at_last_log);
        last_logged = now;
        refused_at_last_log = counters.refused;
    }
    return fd >= 0;
}

static void *accept_connections(void *arg)
{
    int listen_fd = *(int *)arg;

    if (coro_defer(stop_listening, arg) != 0 || watch(listen_fd) != 0)
        return give_up("http_server: watching the listening socket");
    while (!coro_canceled()) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd >= 0) {
            start_connection(fd);
            coro_yield(); /* a burst of connections must not hog the pump */
        } else if (errno == EAGAIN || errno == EWOULDBLOCK)
            coro_park(); /* ECANCELED ends the loop: the door closes */
        else if (errno == EMFILE || errno == ENFILE) {
            if (refuse_one_connection(listen_fd, errno))
                coro_yield(); /* the next one, after the others ran */
            else
                /* Nobody waiting (or no spare). A new client's edge ends
                 * this park; a connection closing sends none, so look
                 * again after a pause. Never a spin. */
                coro_park_for(100 * CORO_MSEC);
        } else if (errno == ENOBUFS || errno == ENOMEM)
            /* Out of memory: the connection stays queued. No new edge
             * may come for it, so retry after a pause. */
            coro_sleep(100 * CORO_MSEC);
        else if (errno != EINTR && errno != ECONNABORTED)
            return give_up("http_server: accept4");
    }
    return NULL; /* stop_listening() runs now */
}

/* As many descriptors as we may have; returns how many that is. */
static size_t raise_fd_limit(void)
{
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
        return 1024;
    limit.rlim_cur = limit.rlim_max;
    if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 1024 * 1024)
        limit.rlim_cur = 1024 * 1024; /* the kernel's usual nr_open */
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
        getrlimit(RLIMIT_NOFILE, &limit);
    return (size_t)limit.rlim_cur;
}

/* A listening socket on 127.0.0.1:port; `*port` becomes the bound port. */
static int open_listener(int *port)
{
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t addr_len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((uint16_t)*port);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &addr_len) != 0) {
        perror("http_server: listen");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

static bool parse_number(const char *text, long max, long *out)
{
    char *end;

    errno = 0;
    *out = strtol(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' && *out >= 0 && *out <= max;
}

/*
 * How long the pump may sleep at a time before it looks at the close.
 * The close on a signal wakes it at once (the handler writes the
 * scheduler's wake_fd), so a minute is only a backstop. (Under
 * ThreadSanitizer a SIGTERM once went unanswered here for good: the tool
 * had queued it in a coroutine that then parked. The library's switch
 * now blocks signals across each switch in that build; see coro.c.)
 */
#define CLOSE_CHECK (60 * CORO_SEC)

/* Pump until the scheduler is closed (by a signal). An idle pump sleeps
 * in wait_for_sockets(): a socket's readiness ends it, and so does the
 * close. */
static void pump_until_closed(coro_sched *s)
{
    coro_stats stats = {0};

    while (!stats.closed) {
        coro_sched_poll_for(s, CLOSE_CHECK);
        coro_sched_stats(s, &stats);
    }
    printf("closing: %lu connections open, %zu coroutines alive\n",
           counters.open, stats.alive);
    fflush(stdout);
}

static void print_report(const coro_sched *s, size_t abandoned)
{
    coro_stats st;

    coro_sched_stats(s, &st);
    printf("connections accepted:  %lu\n", counters.connections);
    printf("requests answered:     %lu (%lu after the close)\n",
           counters.requests, counters.requests_after_close);
    printf("idle closed at close:  %lu\n", counters.idle_closed);
    printf("refused (no fds):      %lu\n", counters.refused);
    printf("scheduler stats:\n");
    printf("  closed:              %s\n", st.closed ? "yes" : "no");
    printf("  alive:               %zu\n", st.alive);
    printf("  ready:               %zu\n", st.ready);
    printf("  posts pending:       %zu\n", st.posts_pending);
    printf("  posts rejected:      %zu\n", st.posts_rejected);
    printf("  timers pending:      %zu\n", st.timers_pending);
    printf("  resumes:             %llu\n", (unsigned long long)st.resumes);
    printf("  longest resume:      %.1f us\n", st.longest_resume_ns / 1e3);
    printf("  wake latency max:    %.1f us\n", st.wake_latency_max_ns / 1e3);
    printf("  wake latency mean:   %.1f us\n", st.wake_latency_mean_ns / 1e3);
    printf("abandoned:             %zu\n", abandoned);
    fflush(stdout);
}

/* ------------------------------------------------------------------------
 * --demo: a client of our own, on a thread of its own, for the tour. It
 * asks twice on one kept-alive connection, once for a missing page, then
 * sends SIGTERM to the process and waits for the server to close its idle
 * connection.
 */

static bool demo;
static int demo_port;
static pthread_t demo_thread;

/* Send `request` and print the status line and body of the answer. */
static void demo_ask(int fd, const char *request)
{
    char answer[1024];
    ssize_t n;

    if (send(fd, request, strlen(request), MSG_NOSIGNAL) < 0)
        return;
    n = recv(fd, answer, sizeof answer - 1, 0); /* one short answer */
    if (n <= 0)
        return;
    answer[n] = '\0';
    printf("  client: %.*s", (int)strcspn(answer, "\n") + 1, answer);
    if (strstr(answer, "\r\n\r\n") != NULL)
        printf("          body: %s", strstr(answer, "\r\n\r\n") + 4);
}

static void *demo_client(void *arg)
{
    struct sockaddr_in address = {.sin_family = AF_INET};
    char byte;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    (void)arg;
    address.sin_port = htons((uint16_t)demo_port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address)) {
        perror("demo client");
        kill(getpid(), SIGTERM);
        return NULL;
    }
    demo_ask(fd, "GET / HTTP/1.1\r\nHost: demo\r\n\r\n");
    demo_ask(fd, "GET / HTTP/1.1\r\nHost: demo\r\n\r\n");
    demo_ask(fd, "GET /missing HTTP/1.1\r\nHost: demo\r\n\r\n");
    printf("  client: sending SIGTERM, keeping the connection open\n");
    fflush(stdout);
    kill(getpid(), SIGTERM);
    if (recv(fd, &byte, 1, 0) == 0)
        printf("  client: the server closed the idle connection\n");
    close(fd);
    return NULL;
}

/* Start the client with every signal blocked: SIGTERM is the main
 * thread's to take. */
static int demo_start(int port)
{
    sigset_t all, old;
    int err;

    demo_port = port;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    err = pthread_create(&demo_thread, NULL, demo_client, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

int main(int argc, char **argv)
{
    long port = 0, grace_ms = DEFAULT_GRACE_MS;
    int listen_fd, bound_port;
    size_t abandoned;

    if (argc == 2 && strcmp(argv[1], "--demo") == 0) {
        demo = true;
        argc = 1;
    }
    if (argc > 3 || (argc > 1 && !parse_number(argv[1], 65535, &port)) ||
        (argc > 2 && !parse_number(argv[2], MAX_GRACE_MS, &grace_ms))) {
        fprintf(stderr, "usage: http_server [port (0: any)] [grace_ms]\n"
                        "       http_server --demo\n");
        return 2;
    }
    grace_ns = (uint64_t)grace_ms * CORO_MSEC;
    watcher_slots = raise_fd_limit();
    spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* -1: do without */
    watchers = calloc(watcher_slots, sizeof *watchers);
    bound_port = (int)port;
    listen_fd = open_listener(&bound_port);
    sched = coro_sched_create();
    if (watchers == NULL || listen_fd < 0 || sched == NULL ||
        readiness_start(sched) != 0) {
        fprintf(stderr, "http_server: cannot start\n");
        return 1;
    }
    /* Before the port is printed: whoever reads it may signal at once. */
    if (coro_sched_close_on_signal(sched, SIGTERM) != 0 ||
        coro_sched_close_on_signal(sched, SIGINT) != 0 ||
        coro_go(sched, accept_connections, &listen_fd) != 0) {
        fprintf(stderr, "http_server: cannot start\n");
        return 1;
    }
    printf("listening on port %d\n", bound_port);
    fflush(stdout);
    if (demo && demo_start(bound_port) != 0) {
        fprintf(stderr, "http_server: cannot start the demo client\n");
        return 1;
    }

    pump_until_closed(sched);
    abandoned = coro_sched_shutdown(sched, grace_ns);
    readiness_stop(sched);
    if (demo)
        pthread_join(demo_thread, NULL);
    print_report(sched, abandoned);
    if (coro_sched_destroy(sched) != 0) {
        fprintf(stderr, "http_server: scheduler still busy\n");
        return 1;
    }
    free(watchers);
    if (spare_fd >= 0)
        close(spare_fd);
    return failed ? 1 : 0;
}
