/*
 * trace.c — a record of the scheduling, as Chrome Trace Event JSON.
 *
 *   pump of scheduler A ──append──> A's buffer ──full──┐
 *   pump of scheduler B ──append──> B's buffer ──full──┤
 *                                                      v
 *                              queue of full buffers (at most QUEUED_MAX)
 *                                                      │
 *                              writer thread: formats each record as one
 *                              line of JSON, writes it to the file
 *
 * A pump never formats or writes: it copies a record of 64 bytes into its
 * scheduler's buffer, under that scheduler's lock, and every thousand
 * records hands a full buffer to the writer. The file's I/O happens on
 * the writer's thread. If the writer falls behind, a full buffer that
 * finds the queue full is dropped, counted, and the count reported at the
 * stop: the pump is never held up by the disk.
 *
 * A trace that cannot be written (a bad path, a full disk) is reported
 * once: coro_trace_start() returns the error, or the writer prints it on
 * stderr and recording stops. It never stops the program.
 *
 * Locks, in the one order they are taken: `trace.lock` (the session, the
 * list of schedulers, the queue), then a scheduler's `trace.lock` (its
 * buffer). A pump never holds its own lock while taking `trace.lock`
 * (append() lets go of it first), so the order holds everywhere.
 *
 * Owns: the trace's session, its file and writer thread; every
 * scheduler's struct sched_trace.
 */
#define _GNU_SOURCE /* gettid(), pthread_getname_np() */
#include "sched_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdio_ext.h> /* __fpurge() */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Records per buffer: 64 KiB a buffer. */
enum { RECORDS_PER_BUFFER = 1024 };
/* Full buffers waiting for the writer, at most: 64 MiB, a million events.
 * The writer formats an event in 100 to 300 ns, a pump records one in
 * tens: a burst of a million resumes fits, and a program that resumes
 * that fast for long has its events dropped (and counted) rather than its
 * memory grow without end. */
enum { QUEUED_MAX = 1024 };

typedef enum {
    REC_RESUME,   /* a coroutine ran: time, duration, left */
    REC_GO,       /* coro_go() created it */
    REC_SPAWN,    /* coro_spawn() created it */
    REC_POST,     /* coro_post() queued post number `id` */
    REC_POST_RAN, /* post number `id` ran: time, duration */
    REC_WAIT,     /* it waits: `left` is why, `arg` its deadline */
    REC_TIMER,    /* its timer fired */
    REC_WAKE,     /* it was made ready: arrow number `arg` starts */
    REC_SENT,     /* another thread sent a request: `left` is what,
                     arrow `arg` starts on lane `lane` */
    REC_ARRIVED,  /* the pump took in a wake: arrow `arg` ends */
    REC_NOTE      /* a step of stopping: `left` is which, `arg` a number */
} record_kind;

/* One event, as the pump copies it: 64 bytes. */
struct trace_record {
    uint64_t time;     /* coro__trace_clock() */
    uint64_t duration; /* a slice's; 0 for an instant */
    uint64_t id;       /* the coroutine's trace id, or the post's number */
    uint64_t arg;      /* REC_WAIT: the deadline; REC_WAKE: its arrow;
                          REC_RESUME: the arrow that ends here, or 0 */
    int32_t lane;      /* REC_SENT: the sending thread's; else 0: the
                          buffer's */
    uint8_t kind;      /* record_kind */
    uint8_t left;      /* REC_RESUME: coro_trace_left; REC_WAIT: why;
                          REC_SENT: coro_trace_sent */
    char name[CORO_NAME_MAX + 1]; /* the coroutine's, "" if it has none */
};

struct trace_buffer {
    struct trace_buffer *next; /* in the writer's queue */
    uint32_t session;          /* the trace it was filled for */
    int tid;                   /* the lane: the recording thread */
    size_t used;
    struct trace_record record[RECORDS_PER_BUFFER];
};

_Atomic uint32_t coro__trace_on;

/* Coroutines get their trace id when first recorded, and arrows (flow
 * events) their number when they start: 1, 2, 3... over the whole
 * process, so that no two repeat, across schedulers or traces. Relaxed:
 * only the numbers matter, nothing is published with them. */
static _Atomic uint64_t next_coro_id = 1;
static _Atomic uint64_t next_arrow = 1;

static struct {
    pthread_mutex_t lock;     /* guards all of this */
    pthread_cond_t work;      /* to the writer: a buffer, or the stop */
    pthread_cond_t stopped;   /* to a second coro_trace_stop(): done */
    coro_sched *schedulers;   /* every scheduler, newest first */
    uint32_t session;         /* the newest trace's number */
    bool recording;           /* a trace is open (even if writing failed) */
    bool stopping;            /* the writer is to finish and return */
    pthread_t writer;
    FILE *file;
    char *path;
    uint64_t origin;          /* the clock at the start: ts 0 */
    struct trace_buffer *queue_head, *queue_tail;
    size_t queued;
    uint64_t dropped;         /* records dropped: the queue was full */
    int error;                /* the first write error, 0 if none */
} trace = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .stopped = PTHREAD_COND_INITIALIZER,
};

uint64_t coro__trace_clock(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ── Writing: the writer thread's side ────────────────────────────────── */

static const char *const left_names[] = {"yielded", "parked", "finished"};
/* A sent request's arrow: its category and name, which must be those of
 * where it ends (a viewer pairs the two ends by id, category and name):
 * a go's ends at a resume, as a wake's does; and what was sent. */
static const char *const sent_cats[] = {"wake", "post", "wake"};
static const char *const sent_names[] = {"wake", "post", "wake"};
static const char *const sent_what[] = {"go", "post", "wake"};
static const char *const note_names[] = {
    [CORO_TRACE_CANCEL] = "cancel",
    [CORO_TRACE_CLOSE] = "close",
    [CORO_TRACE_CLOSE_IN] = "close taken in",
    [CORO_TRACE_DRAIN] = "shutdown: drain",
    [CORO_TRACE_DRAINED] = "shutdown: drained",
    [CORO_TRACE_ABANDON] = "abandon",
};
static const char *const wait_names[] = {
    [CORO_WAIT_NONE] = "wait",
    [CORO_WAIT_SLEEP] = "sleep",
    [CORO_WAIT_PARK] = "park",
    [CORO_WAIT_EVENT] = "await",
};

/* `text` cut to fit `size` and with nothing that JSON would need escaped:
 * a control character, '"' or '\\' becomes '?'. Returns `out`. */
static char *printable(char *out, size_t size, const char *text)
{
    size_t i;

    for (i = 0; i + 1 < size && text[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)text[i];

        out[i] = (ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\')
                     ? '?'
                     : (char)ch;
    }
    out[i] = '\0';
    return out;
}

/* Microseconds since the start, as the format wants them, to the ns. */
static void put_time(FILE *f, const char *field, uint64_t ns)
{
    fprintf(f, ",\"%s\":%" PRIu64 ".%03u", field, ns / 1000,
            (unsigned)(ns % 1000));
}

/* The name a coroutine's slices carry: its own, or "coro ID". Names hold
 * printable characters but '"' and '\\' (coro_set_name() makes sure), so
 * they need no escaping. */
static void put_coroutine_name(FILE *f, const struct trace_record *r)
{
    if (r->name[0] != '\0')
        fprintf(f, "\"name\":\"%s\"", r->name);
    else
        fprintf(f, "\"name\":\"coro %" PRIu64 "\"", r->id);
}

/* One record as one line: the fields every event has, then its own. */
static void note_lane(int tid);

static void put_record(FILE *f, int pid, int tid, const struct trace_record *r)
{
    uint64_t at = r->time > trace.origin ? r->time - trace.origin : 0;

    if (r->lane != 0) { /* sent from another thread: on its lane */
        tid = r->lane;
        note_lane(tid);
    }
    switch ((record_kind)r->kind) {
    case REC_RESUME:
        if (r->arg != 0) { /* a wake's arrow ends where the slice begins */
            fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"wake\","
                       "\"name\":\"wake\",\"id\":%" PRIu64 ",\"pid\":%d,"
                       "\"tid\":%d", r->arg, pid, tid);
            put_time(f, "ts", at);
            fprintf(f, "}");
        }
        fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"resume\",");
        put_coroutine_name(f, r);
        fprintf(f, ",\"pid\":%d,\"tid\":%d", pid, tid);
        put_time(f, "ts", at);
        put_time(f, "dur", r->duration);
        fprintf(f, ",\"args\":{\"id\":%" PRIu64 ",\"left\":\"%s\"}}", r->id,
                left_names[r->left]);
        break;
    case REC_GO:
    case REC_SPAWN:
        fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"start\","
                   "\"name\":\"%s\",\"pid\":%d,\"tid\":%d",
                r->kind == REC_GO ? "go" : "spawn", pid, tid);
        put_time(f, "ts", at);
        fprintf(f, ",\"args\":{\"coroutine\":%" PRIu64 "}}", r->id);
        break;
    case REC_POST:
        fprintf(f, ",\n{\"ph\":\"s\",\"cat\":\"post\",\"name\":\"post\","
                   "\"id\":%" PRIu64 ",\"pid\":%d,\"tid\":%d", r->id, pid, tid);
        put_time(f, "ts", at);
        fprintf(f, "}");
        break;
    case REC_POST_RAN:
        fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"post\","
                   "\"name\":\"post\",\"id\":%" PRIu64 ",\"pid\":%d,"
                   "\"tid\":%d", r->id, pid, tid);
        put_time(f, "ts", at);
        fprintf(f, "}");
        fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"post\",\"name\":\"post\","
                   "\"pid\":%d,\"tid\":%d", pid, tid);
        put_time(f, "ts", at);
        put_time(f, "dur", r->duration);
        fprintf(f, ",\"args\":{\"post\":%" PRIu64 "}}", r->id);
        break;
    case REC_WAIT:
        fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"wait\","
                   "\"name\":\"%s\",\"pid\":%d,\"tid\":%d",
                r->left < 4 ? wait_names[r->left] : "wait", pid, tid);
        put_time(f, "ts", at);
        fprintf(f, ",\"args\":{\"coroutine\":%" PRIu64, r->id);
        if (r->arg == CORO_FOREVER)
            fprintf(f, ",\"deadline\":\"none\"");
        else /* on the trace's time axis, as ts */
            put_time(f, "deadline",
                     r->arg > trace.origin ? r->arg - trace.origin : 0);
        fprintf(f, "}}");
        break;
    case REC_TIMER:
        fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"timer\","
                   "\"name\":\"timer\",\"pid\":%d,\"tid\":%d", pid, tid);
        put_time(f, "ts", at);
        fprintf(f, ",\"args\":{\"coroutine\":%" PRIu64 "}}", r->id);
        break;
    case REC_SENT:
        fprintf(f, ",\n{\"ph\":\"s\",\"cat\":\"%s\",\"name\":\"%s\","
                   "\"id\":%" PRIu64 ",\"pid\":%d,\"tid\":%d",
                sent_cats[r->left], sent_names[r->left], r->arg, pid, tid);
        put_time(f, "ts", at);
        fprintf(f, ",\"args\":{\"sent\":\"%s\",\"across_threads\":true}}",
                sent_what[r->left]);
        break;
    case REC_ARRIVED:
        fprintf(f, ",\n{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"wake\","
                   "\"name\":\"wake\",\"id\":%" PRIu64 ",\"pid\":%d,"
                   "\"tid\":%d", r->arg, pid, tid);
        put_time(f, "ts", at);
        fprintf(f, "}");
        fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"wake\","
                   "\"name\":\"taken in\",\"pid\":%d,\"tid\":%d",
                pid, tid);
        put_time(f, "ts", at);
        fprintf(f, "}");
        break;
    case REC_NOTE:
        fprintf(f, ",\n{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"shutdown\","
                   "\"name\":\"%s\",\"pid\":%d,\"tid\":%d",
                note_names[r->left], pid, tid);
        put_time(f, "ts", at);
        fprintf(f, ",\"args\":{");
        if (r->id != 0)
            fprintf(f, "\"coroutine\":%" PRIu64 "%s", r->id,
                    r->left == CORO_TRACE_DRAINED || r->arg != 0 ? "," : "");
        if (r->left == CORO_TRACE_DRAINED)
            fprintf(f, "\"abandoned\":%" PRIu64, r->arg);
        else if (r->arg != 0)
            fprintf(f, "\"signal\":%" PRIu64, r->arg);
        fprintf(f, "}}");
        break;
    case REC_WAKE:
        fprintf(f, ",\n{\"ph\":\"s\",\"cat\":\"wake\",\"name\":\"wake\","
                   "\"id\":%" PRIu64 ",\"pid\":%d,\"tid\":%d", r->arg, pid, tid);
        put_time(f, "ts", at);
        fprintf(f, ",\"args\":{\"coroutine\":%" PRIu64 "}}", r->id);
        break;
    }
}

/* The lanes in the file so far: the writer notes each, and the stop
 * names them all at the end (a thread_name event each). */
static struct {
    int *tid;
    size_t count, room;
} lanes;

static void note_lane(int tid)
{
    int *grown;

    for (size_t i = 0; i < lanes.count; i++)
        if (lanes.tid[i] == tid)
            return;
    if (lanes.count == lanes.room) {
        size_t room = lanes.room ? 2 * lanes.room : 8;

        grown = realloc(lanes.tid, room * sizeof *grown);
        if (grown == NULL)
            return; /* unnamed: the lane shows its number */
        lanes.tid = grown;
        lanes.room = room;
    }
    lanes.tid[lanes.count++] = tid;
}

/* What each thread that records was called (pthread_setname_np(), or
 * the program's name), as it told us while it ran: by the end of a trace
 * many of them have ended. Guarded by trace.lock. */
static struct lane_name {
    int tid;
    char name[16];
} *lane_names;
static size_t lane_names_count, lane_names_room;

/* The calling thread tells its lane's name (a thread that ends and a new
 * one that gets its number: the newer name wins). */
static void name_this_lane(int tid)
{
    char name[16] = "";
    struct lane_name *n = NULL;

    pthread_getname_np(pthread_self(), name, sizeof name);
    pthread_mutex_lock(&trace.lock);
    for (size_t i = 0; i < lane_names_count && n == NULL; i++)
        if (lane_names[i].tid == tid)
            n = &lane_names[i];
    if (n == NULL && lane_names_count == lane_names_room) {
        size_t room = lane_names_room ? 2 * lane_names_room : 8;
        struct lane_name *grown =
            realloc(lane_names, room * sizeof *grown);

        if (grown != NULL) {
            lane_names = grown;
            lane_names_room = room;
        }
    }
    if (n == NULL && lane_names_count < lane_names_room)
        n = &lane_names[lane_names_count++];
    if (n != NULL) {
        n->tid = tid;
        printable(n->name, sizeof n->name, name);
    }
    pthread_mutex_unlock(&trace.lock);
}

/* Name every lane of the file. Called with the lock, the writer done. */
static void put_lane_names(FILE *f, int pid)
{
    for (size_t i = 0; i < lanes.count; i++) {
        const char *name = "thread";

        for (size_t k = 0; k < lane_names_count; k++)
            if (lane_names[k].tid == lanes.tid[i] &&
                lane_names[k].name[0] != '\0')
                name = lane_names[k].name;
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,"
                   "\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                pid, lanes.tid[i], name);
    }
}

static int write_buffer(FILE *f, const struct trace_buffer *b)
{
    int pid = (int)getpid();

    note_lane(b->tid);
    for (size_t i = 0; i < b->used; i++)
        put_record(f, pid, b->tid, &b->record[i]);
    if (fflush(f) != 0 || ferror(f))
        return errno != 0 ? errno : EIO;
    return 0;
}

/* A write failed: say so once, and stop recording. Called with the lock. */
static void write_failed(int err)
{
    if (trace.error != 0)
        return;
    trace.error = err;
    atomic_store_explicit(&coro__trace_on, 0, memory_order_relaxed);
    fprintf(stderr, "coro trace: cannot write %s: %s; recording stops\n",
            trace.path, strerror(err));
}

/* The writer: takes the queued buffers, writes them, frees them; returns
 * once a stop asked it to and the queue is empty. */
static void *writer_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&trace.lock);
    for (;;) {
        struct trace_buffer *b = trace.queue_head;
        bool failed = trace.error != 0;

        if (b == NULL) {
            if (trace.stopping)
                break;
            pthread_cond_wait(&trace.work, &trace.lock);
            continue;
        }
        trace.queue_head = NULL;
        trace.queue_tail = NULL;
        trace.queued = 0;
        pthread_mutex_unlock(&trace.lock);
        /* Outside the lock: the pumps go on queueing meanwhile. */
        int err = 0;
        while (b != NULL) {
            struct trace_buffer *next = b->next;

            if (!failed && err == 0)
                err = write_buffer(trace.file, b);
            free(b);
            b = next;
        }
        pthread_mutex_lock(&trace.lock);
        if (err != 0)
            write_failed(err);
    }
    pthread_mutex_unlock(&trace.lock);
    return NULL;
}

/* ── Recording: the pumps' side ───────────────────────────────────────── */

/* Put `b` at the end of the writer's queue. Called with the lock. */
static void queue_append(struct trace_buffer *b)
{
    b->next = NULL;
    if (trace.queue_tail != NULL)
        trace.queue_tail->next = b;
    else
        trace.queue_head = b;
    trace.queue_tail = b;
    trace.queued++;
}

/* Give a full (or last) buffer to the writer, or drop it if the queue is
 * full or its trace is over. Takes the trace's lock: never call with a
 * scheduler's lock held. */
static void hand_over(struct trace_buffer *b)
{
    pthread_mutex_lock(&trace.lock);
    if (b->session == trace.session && trace.recording && !trace.stopping &&
        trace.queued < QUEUED_MAX) {
        queue_append(b);
        pthread_cond_signal(&trace.work);
        b = NULL;
    } else if (b->session == trace.session) {
        trace.dropped += b->used;
    }
    pthread_mutex_unlock(&trace.lock);
    free(b);
}

/*
 * Copy `r` into the buffer of `s`, the scheduler whose lane it goes on.
 *
 * Whether it is kept is decided here, under the scheduler's lock: the
 * trace's number is loaded under it, and coro_trace_stop() sets it to 0
 * before it takes each scheduler's lock to collect its buffer. So a
 * record that gets the lock after the stop collected this scheduler sees
 * 0 (the lock orders the two) and is dropped, and one that got it before
 * is in the buffer the stop collects. A record that sees 0 leaves the
 * buffer as it is: the stop is on its way to collect it. (Thrown away
 * there, as this code first did, it lost the records before it: the
 * model of this hand-over, trace_stop.pml in Chapter 4's models, found
 * it.) Only a buffer of an older trace, met while a newer one records,
 * is thrown away.
 */
static void append(coro_sched *s, const struct trace_record *r)
{
    struct sched_trace *t = &s->trace;
    struct trace_buffer *b, *full = NULL;
    uint32_t session;

    pthread_mutex_lock(&t->lock);
    session = atomic_load_explicit(&coro__trace_on, memory_order_relaxed);
    b = t->buffer;
    if (b != NULL && session != 0 && b->session != session) {
        free(b); /* an older trace's, never collected */
        b = t->buffer = NULL;
    }
    if (session != 0 && b == NULL) {
        b = malloc(sizeof *b);
        if (b != NULL) {
            b->session = session;
            b->tid = t->tid;
            b->used = 0;
        }
        t->buffer = b;
    }
    if (session != 0 && b != NULL) {
        b->record[b->used++] = *r;
        if (b->used == RECORDS_PER_BUFFER) {
            full = b;
            t->buffer = NULL;
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (full != NULL)
        hand_over(full);
}

/* The trace id of `c`, given on its first record. Only `c`'s owner
 * records it (its pump, or its creator on the owning thread). */
static uint64_t trace_id(coro *c)
{
    if (c->trace_id == 0)
        c->trace_id = atomic_fetch_add_explicit(&next_coro_id, 1,
                                                memory_order_relaxed);
    return c->trace_id;
}

void coro__trace_resume(coro_sched *s, coro *c, uint64_t began,
                        coro_trace_left left)
{
    struct trace_record r = {
        .time = began,
        .duration = coro__trace_clock() - began,
        .id = trace_id(c),
        .arg = c->trace_arrow,
        .kind = REC_RESUME,
        .left = (uint8_t)left,
    };

    c->trace_arrow = 0; /* ended here */
    memcpy(r.name, c->name, sizeof r.name);
    append(s, &r);
}

void coro__trace_created(coro_sched *s, coro *c, bool detached)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .id = trace_id(c),
        .kind = detached ? REC_GO : REC_SPAWN,
    };

    append(s, &r);
}

uint64_t coro__trace_posted(coro_sched *s)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .id = atomic_fetch_add_explicit(&next_arrow, 1, memory_order_relaxed),
        .kind = REC_POST,
    };

    append(s, &r);
    return r.id;
}

void coro__trace_post_ran(coro_sched *s, uint64_t number, uint64_t began)
{
    struct trace_record r = {
        .time = began,
        .duration = coro__trace_clock() - began,
        .id = number,
        .kind = REC_POST_RAN,
    };

    append(s, &r);
}

void coro__trace_wait(coro *c, coro_wait why, uint64_t deadline)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .id = trace_id(c),
        .arg = deadline,
        .kind = REC_WAIT,
        .left = (uint8_t)why,
    };

    append(c->sched, &r);
}

void coro__trace_timer(coro_sched *s, coro *c)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .id = trace_id(c),
        .kind = REC_TIMER,
    };

    append(s, &r);
}

void coro__trace_woken(coro_sched *s, coro *c)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .id = trace_id(c),
        .arg = atomic_fetch_add_explicit(&next_arrow, 1, memory_order_relaxed),
        .kind = REC_WAKE,
    };

    c->trace_arrow = r.arg;
    append(s, &r);
}

/* The calling thread's id, its lane: read once per thread (gettid() is
 * a system call), and again in a child of fork(). */
static _Thread_local int lane_of_this_thread;

static int this_thread_lane(void)
{
    if (lane_of_this_thread == 0) {
        lane_of_this_thread = (int)gettid();
        name_this_lane(lane_of_this_thread);
    }
    return lane_of_this_thread;
}

uint64_t coro__trace_sent(coro_sched *s, coro_trace_sent what)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .arg = atomic_fetch_add_explicit(&next_arrow, 1, memory_order_relaxed),
        .lane = this_thread_lane(),
        .kind = REC_SENT,
        .left = (uint8_t)what,
    };

    append(s, &r);
    return r.arg;
}

void coro__trace_arrived(coro_sched *s, uint64_t arrow)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .arg = arrow,
        .kind = REC_ARRIVED,
    };

    append(s, &r);
}

void coro__trace_note(coro_sched *s, coro_trace_note what, coro *c,
                      uint64_t number)
{
    struct trace_record r = {
        .time = coro__trace_clock(),
        .id = c != NULL ? trace_id(c) : 0,
        .arg = number,
        .lane = this_thread_lane(),
        .kind = REC_NOTE,
        .left = (uint8_t)what,
    };

    append(s, &r);
}

/* ── Schedulers come and go ───────────────────────────────────────────── */

static void start_from_environment(void);

void coro__trace_sched_created(coro_sched *s)
{
    static pthread_once_t environment_read = PTHREAD_ONCE_INIT;
    struct sched_trace *t = &s->trace;

    pthread_once(&environment_read, start_from_environment);
    pthread_mutex_init(&t->lock, NULL);
    t->buffer = NULL;
    t->tid = (int)gettid();
    name_this_lane(t->tid);
    pthread_mutex_lock(&trace.lock);
    t->prev = NULL;
    t->next = trace.schedulers;
    if (trace.schedulers != NULL)
        trace.schedulers->trace.prev = s;
    trace.schedulers = s;
    pthread_mutex_unlock(&trace.lock);
}

void coro__trace_sched_destroyed(coro_sched *s)
{
    struct sched_trace *t = &s->trace;
    struct trace_buffer *last;

    pthread_mutex_lock(&trace.lock);
    if (t->prev != NULL)
        t->prev->trace.next = t->next;
    else
        trace.schedulers = t->next;
    if (t->next != NULL)
        t->next->trace.prev = t->prev;
    pthread_mutex_unlock(&trace.lock);
    /* Off the list: no stop can reach it now. What it recorded goes to
     * the writer (or away, if its trace is over). */
    pthread_mutex_lock(&t->lock);
    last = t->buffer;
    t->buffer = NULL;
    pthread_mutex_unlock(&t->lock);
    if (last != NULL)
        hand_over(last);
    pthread_mutex_destroy(&t->lock);
}

/* ── Start and stop ───────────────────────────────────────────────────── */

/* In a child of fork(): the writer thread was not copied, so the trace is
 * the parent's alone. The child records nothing; its stop does nothing. */
static void forget_in_child(void)
{
    atomic_store_explicit(&coro__trace_on, 0, memory_order_relaxed);
    pthread_mutex_init(&trace.lock, NULL);
    pthread_cond_init(&trace.work, NULL);
    pthread_cond_init(&trace.stopped, NULL);
    trace.recording = false;
    trace.stopping = false;
    while (trace.queue_head != NULL) { /* the parent's writer's to write */
        struct trace_buffer *next = trace.queue_head->next;

        free(trace.queue_head);
        trace.queue_head = next;
    }
    trace.queue_tail = NULL;
    trace.queued = 0;
    if (trace.file != NULL) {
        __fpurge(trace.file); /* the parent's unwritten bytes are its own */
        fclose(trace.file);   /* this process's descriptor only */
    }
    trace.file = NULL;
    free(trace.path);
    trace.path = NULL;
    lane_of_this_thread = 0; /* the parent's thread id */
}

static void register_fork_handler(void)
{
    pthread_atfork(NULL, NULL, forget_in_child);
}

int coro_trace_start(const char *path)
{
    static pthread_once_t fork_handler = PTHREAD_ONCE_INIT;
    char program[32];
    FILE *file;
    char *copy;
    int err;

    if (path == NULL || path[0] == '\0')
        return EINVAL;
    pthread_mutex_lock(&trace.lock);
    if (trace.recording) {
        pthread_mutex_unlock(&trace.lock);
        return EBUSY;
    }
    copy = strdup(path);
    file = fopen(path, "w");
    if (copy == NULL || file == NULL) {
        err = copy == NULL ? ENOMEM : errno;
        free(copy);
        pthread_mutex_unlock(&trace.lock);
        return err;
    }
    trace.file = file;
    trace.path = copy;
    trace.stopping = false;
    trace.error = 0;
    trace.dropped = 0;
    trace.queued = 0;
    trace.queue_head = trace.queue_tail = NULL;
    lanes.count = 0;
    err = pthread_create(&trace.writer, NULL, writer_main, NULL);
    if (err != 0) {
        fclose(file);
        free(copy);
        pthread_mutex_unlock(&trace.lock);
        return err;
    }
    pthread_once(&fork_handler, register_fork_handler);
    trace.recording = true;
    trace.session++;
    if (trace.session == 0)
        trace.session = 1; /* 0 means "off" */
    trace.origin = coro__trace_clock();
    fprintf(file, "{\"traceEvents\":[\n{\"ph\":\"M\",\"name\":\"process_name\","
                  "\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"%s\"}}",
            (int)getpid(),
            printable(program, sizeof program, program_invocation_short_name));
    /* Relaxed: what a pump needs of the session (the number, the writer)
     * it reaches under locks this store is ordered before (append(),
     * hand_over()). */
    atomic_store_explicit(&coro__trace_on, trace.session,
                          memory_order_relaxed);
    pthread_mutex_unlock(&trace.lock);
    return 0;
}

int coro_trace_stop(void)
{
    int err;

    pthread_mutex_lock(&trace.lock);
    while (trace.recording && trace.stopping) /* another thread stops it */
        pthread_cond_wait(&trace.stopped, &trace.lock);
    if (!trace.recording) {
        pthread_mutex_unlock(&trace.lock);
        return 0;
    }
    /* Off first, then each scheduler's buffer: append() says why. */
    atomic_store_explicit(&coro__trace_on, 0, memory_order_relaxed);
    for (coro_sched *s = trace.schedulers; s != NULL; s = s->trace.next) {
        struct trace_buffer *b;

        pthread_mutex_lock(&s->trace.lock);
        b = s->trace.buffer;
        s->trace.buffer = NULL;
        pthread_mutex_unlock(&s->trace.lock);
        /* Queued whatever the queue holds, past QUEUED_MAX: the writer
         * is about to finish, and a stop loses nothing it collected. */
        if (b != NULL && b->session == trace.session)
            queue_append(b);
        else
            free(b);
    }
    trace.stopping = true;
    pthread_cond_signal(&trace.work);
    pthread_mutex_unlock(&trace.lock);

    pthread_join(trace.writer, NULL);

    pthread_mutex_lock(&trace.lock);
    if (trace.error == 0) {
        put_lane_names(trace.file, (int)getpid());
        fprintf(trace.file, "\n],\"displayTimeUnit\":\"ns\","
                            "\"otherData\":{\"dropped_events\":%" PRIu64
                            "}}\n",
                trace.dropped);
        if (fflush(trace.file) != 0 || ferror(trace.file))
            write_failed(errno != 0 ? errno : EIO);
    }
    if (fclose(trace.file) != 0 && trace.error == 0)
        write_failed(errno);
    if (trace.dropped > 0 && trace.error == 0)
        fprintf(stderr, "coro trace: %" PRIu64 " events dropped in %s: the "
                        "writer fell behind\n", trace.dropped, trace.path);
    err = trace.error;
    free(trace.path);
    trace.file = NULL;
    trace.path = NULL;
    trace.recording = false;
    pthread_cond_broadcast(&trace.stopped);
    pthread_mutex_unlock(&trace.lock);
    return err;
}

static void stop_at_exit(void)
{
    coro_trace_stop();
}

/* CORO_TRACE=path: a trace from the first scheduler to exit(). */
static void start_from_environment(void)
{
    const char *path = getenv("CORO_TRACE");
    int err;

    if (path == NULL || path[0] == '\0')
        return;
    err = coro_trace_start(path);
    if (err != 0) {
        fprintf(stderr, "coro trace: cannot open CORO_TRACE=%s: %s; "
                        "not tracing\n", path, strerror(err));
        return;
    }
    atexit(stop_at_exit);
}

/* ── Names ────────────────────────────────────────────────────────────── */

int coro_set_name(coro *c, const char *name)
{
    if (c == NULL || name == NULL)
        return EINVAL;
    if (c->owner != coro__thread_id())
        return EPERM;
    if (c->state == CORO_DONE)
        return EINVAL;
    /* Kept as printable ASCII, so that the trace's JSON and the debugger
     * show it as it is. */
    printable(c->name, sizeof c->name, name);
    return 0;
}
