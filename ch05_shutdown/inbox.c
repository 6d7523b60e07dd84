/*
 * inbox.c — how other threads hand work to a scheduler's thread.
 *
 * A scheduler's ready queue, timers and caches belong to its thread and
 * have no locks. Another thread never touches them: it pushes a request
 * (start this coroutine, run this post, this parked coroutine is ready)
 * onto the scheduler's inbox, and the owner moves the requests into its
 * own structures the next time its pump looks (coro__drain_inbox(), in
 * sched_impl.h).
 *
 *   producers (any thread)                owner (the pump)
 *   ──────────────────────                ───────────────────
 *   node->next = head                     list = exchange(head, NULL)
 *   CAS(head: node->next -> node)         reverse(list)  -> oldest first
 *   if owner sleeping: wake it            run them
 *     (futex, or the hook's eventfd)
 *
 * The inbox is a lock-free stack (a Treiber stack) that the owner empties
 * all at once. Taking the whole list with one exchange means the owner
 * never pops a single node, which is where lock-free stacks get their ABA
 * problem; reversing the list restores first-in, first-out order for the
 * requests of any one thread.
 *
 * Sleeping and waking without losing a wake-up. The owner, with nothing to
 * do, must block in the kernel, and a push must wake it. The classic race:
 * the owner checks "inbox empty", a producer pushes and sees nobody
 * sleeping, the owner goes to sleep — and sleeps on a non-empty inbox.
 * Two sequentially consistent steps on each side close it:
 *
 *   owner:    sleeping = 1;  if (inbox empty) futex_wait(wake_seq, seen)
 *   producer: push;          if (exchange(sleeping, 0)) wake_seq++, futex_wake
 *
 * In the single total order of seq_cst operations, either the owner's
 * check comes after the push (it sees the node and does not sleep), or the
 * producer's check comes after `sleeping = 1` (it wakes the owner). The
 * futex itself closes the last gap: futex_wait sleeps only if wake_seq
 * still holds the value the owner read before it checked the inbox, so a
 * wake that lands between the check and the wait makes the wait return at
 * once.
 *
 * After its compare-and-swap a producer still reads `sleeping` and may
 * bump `wake_seq` — but by then the owner may have taken the request, run
 * it, and destroyed the scheduler. So those two words live in a wake cell
 * of their own, and cells are never freed: a destroyed inbox gives its
 * cell back to a pool, and a new inbox may get it. The producer reads the
 * cell's address before its push, and whatever it does to the cell after
 * is harmless even if the cell has moved on: at worst the cell's new owner
 * wakes up once for nothing and looks again. (The alternative, counting
 * pushes in progress and having the destroyer wait for zero, costs two
 * more atomic read-modify-writes on every push.)
 *
 * The wait hook (coro_sched_set_wait()). An application with an epoll
 * set of its own wants the pump to sleep there, not on the futex. Then
 * the owner sleeps in the application's function instead, and the cell's
 * eventfd stands in for the futex word: the application keeps the eventfd
 * in its epoll set, a producer that finds the owner sleeping writes 1 to
 * it, and the owner empties it after the hook returns. The protocol is the
 * same one, with the eventfd's counter in the place of wake_seq:
 *
 *   owner:    sleeping = 1;  if (inbox empty) hook(...);  sleeping = 0;
 *             read(eventfd)                        (empty the counter)
 *   producer: push;          if (exchange(sleeping, 0)) write(eventfd, 1)
 *
 * The counter is sticky: a write that lands between the owner's check and
 * its epoll_wait leaves the eventfd readable, so the epoll_wait returns at
 * once — the gap the futex's "still equal to seen" closes. The owner
 * empties it only after the hook returned: emptying it between the check
 * and the hook would throw that very write away (models/inbox_hook.pml
 * shows the lost wake). A write that lands after the emptying stays for
 * the next wait, which then returns once for nothing.
 *
 * Which way a producer wakes is in `wait_fd`: the eventfd while a hook is
 * installed, -1 for the futex. Only the owner changes it, and only while
 * not waiting (coro_sched_set_wait() refuses inside the pump). A producer
 * reads it after its exchange on `sleeping` took a `true`: that true was
 * stored (seq_cst, so also a release) by the owner after its last change
 * of wait_fd, and the exchange is also an acquire, so the producer reads
 * that change or a later one. A later one means the owner has finished the
 * wait the producer found, so it is awake and will see the push when it
 * next looks; any wake is then harmless. Relaxed is enough for wait_fd
 * on both sides for that reason.
 *
 * The eventfd belongs to the cell, like wake_seq, and for the same reason
 * it is never closed: a late producer may write to it after the scheduler
 * is destroyed. The write then costs the cell's next owner, if it uses a
 * hook, one wake-up for nothing. write(2) is async-signal-safe, so the
 * signal handler of signal.c wakes a hook through the same push.
 *
 * A short spin before sleeping. Falling asleep is cheap; waking up is not:
 * a futex wake costs the waker a system call, and the sleeper the time it
 * takes the kernel (and, in a virtual machine, the host) to get a halted
 * processor running again: 3 µs on one of the course's machines, 25 to
 * 30 µs on another, against under 0.5 µs for everything else a wake does.
 * So an idle owner first watches its inbox for up to SPIN_NS, as Go's
 * scheduler and many mutexes do; a request that arrives meanwhile costs
 * neither side a system call. SPIN_NS must outlast that wake-up: in a
 * ping-pong the answer an owner waits for comes from a partner that may
 * itself have slept, so a spin shorter than one wake-up fails every time,
 * both sides back off, and every wake pays the host twice (a 5 µs spin on
 * the slower machine: 25 µs per wake; 50 µs: 0.2 µs). 50 µs is also where
 * Linux's own halt polling in a guest starts. Spinning only pays if
 * requests come back that fast, so a spin that finds nothing makes the
 * owner skip spinning for the next 1, 2, 4, ... up to SPIN_BACKOFF_MAX
 * waits, and a spin that finds work starts it over: a pump that sleeps for
 * milliseconds at a time spins once in 65 waits, under 1 µs per wait. With
 * one processor to run on there is no spin at all: the producer could not
 * run while the owner spins. The spin is only loads of `head`: the
 * handshake above is unchanged, and a spin that sees a request is one more
 * early return, after which the pump looks again.
 * (A wait hook does not spin: its application decides how it waits.)
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sched.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A cell has a cache line to itself: cells of different schedulers must
 * not share one (their owners and producers would slow each other). */
struct coro_wake_cell {
    _Alignas(64) _Atomic uint32_t wake_seq; /* the futex word */
    atomic_bool sleeping; /* the owner is in (or about to enter) wait */
    _Atomic int wait_fd; /* how to wake the owner: its eventfd, -1: futex */
    int event_fd; /* the cell's eventfd, -1 until a hook needs one; never
                     closed. Owner only (handed over under pool_lock). */
    coro_wake_cell *next_free; /* in the pool (under pool_lock) */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static coro_wake_cell *pool; /* cells given back, for reuse */

int coro__inbox_init(coro_inbox *in)
{
    coro_wake_cell *cell;

    pthread_mutex_lock(&pool_lock);
    cell = pool;
    if (cell != NULL)
        pool = cell->next_free;
    pthread_mutex_unlock(&pool_lock);
    if (cell == NULL) {
        cell = aligned_alloc(_Alignof(coro_wake_cell), sizeof *cell);
        if (cell == NULL)
            return ENOMEM;
        atomic_init(&cell->wake_seq, 0);
        cell->event_fd = -1;
    }
    /* A recycled cell keeps its wake_seq and its eventfd: a late
     * producer's bump of either can only cost one spurious wake-up. */
    atomic_store(&cell->sleeping, false);
    atomic_store_explicit(&cell->wait_fd, -1, memory_order_relaxed);
    atomic_init(&in->head, NULL);
    in->spin_skip = 0;
    in->spin_backoff = 0;
    in->cell = cell;
    in->wait_fn = NULL;
    in->wait_arg = NULL;
    return 0;
}

void coro__inbox_fini(coro_inbox *in)
{
    pthread_mutex_lock(&pool_lock);
    in->cell->next_free = pool;
    pool = in->cell;
    pthread_mutex_unlock(&pool_lock);
    in->cell = NULL;
}

void coro__inbox_push(coro_inbox *in, coro_remote *node)
{
    /* Read before the push: after it, `in` may be freed (the cell not). */
    coro_wake_cell *cell = in->cell;
    coro_remote *head = atomic_load_explicit(&in->head, memory_order_relaxed);

    /* seq_cst on success: the push must be ordered before our read of
     * `sleeping` below (see the top of this file). On failure `head` is
     * reloaded and we try again; no other thread is ever blocked. */
    do {
        node->next = head;
    } while (!atomic_compare_exchange_weak_explicit(
        &in->head, &head, node, memory_order_seq_cst, memory_order_relaxed));

    /* A load first: while the owner is awake (the busy case) that is all
     * it costs, with no write to a line the owner also writes. Then an
     * exchange, not a store: the first producer to find the owner asleep
     * clears the flag and makes the one futex_wake; the others see false
     * and skip the system call. */
    if (atomic_load_explicit(&cell->sleeping, memory_order_seq_cst) &&
        atomic_exchange_explicit(&cell->sleeping, false, memory_order_seq_cst)) {
        /* relaxed: the exchange above orders it (see the top of this
         * file, "Which way a producer wakes"). */
        int fd = atomic_load_explicit(&cell->wait_fd, memory_order_relaxed);

        if (fd >= 0) {
            uint64_t one = 1;
            /* Never blocks (EFD_NONBLOCK). It can only fail with EAGAIN,
             * when the counter is nearly 2^64: readable anyway. */
            ssize_t written = write(fd, &one, sizeof one);
            (void)written;
        } else {
            atomic_fetch_add_explicit(&cell->wake_seq, 1, memory_order_release);
            syscall(SYS_futex, &cell->wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL,
                    NULL, 0);
        }
    }
}

coro_remote *coro__inbox_take(coro_inbox *in)
{
    /* acquire: everything a producer wrote before its push (the request's
     * fields, the coroutine it names) is visible to us after this. */
    coro_remote *list =
        atomic_exchange_explicit(&in->head, NULL, memory_order_acquire);
    coro_remote *oldest_first = NULL;

    while (list != NULL) {
        coro_remote *next = list->next;
        list->next = oldest_first;
        oldest_first = list;
        list = next;
    }
    return oldest_first;
}

/* coro__inbox_wait() with a hook: the owner sleeps in the application's
 * function, and a producer writes the eventfd (see the top of this file). */
static void wait_in_hook(coro_inbox *in, uint64_t deadline)
{
    coro_wake_cell *cell = in->cell;
    uint64_t count;
    ssize_t got;

    atomic_store_explicit(&cell->sleeping, true, memory_order_seq_cst);
    if (atomic_load_explicit(&in->head, memory_order_seq_cst) == NULL)
        in->wait_fn(in->wait_arg, cell->event_fd, deadline);
    /* relaxed, as in the futex wait below: a producer that still reads
     * true writes the eventfd once more, and the next wait returns once
     * for nothing. */
    atomic_store_explicit(&cell->sleeping, false, memory_order_relaxed);
    /* Empty the counter, now and not before the hook: a write that came
     * before the hook must make it return. One read takes the whole count
     * (no EFD_SEMAPHORE); EAGAIN means nobody wrote. */
    got = read(cell->event_fd, &count, sizeof count);
    (void)got;
}

/* The spin before a sleep (see the top of this file). */
enum {
    SPIN_NS = 50 * CORO_USEC, /* how long an idle owner watches its inbox */
    SPIN_CHECKS = 32,         /* looks between two clock reads */
    SPIN_BACKOFF_MAX = 64,    /* most waits skipped after failed spins */
};

/* Whether this thread may run beside another: a spin is pointless if the
 * producer it waits for could only run once it stops. Asked once per
 * thread (a later change of its affinity goes unseen). */
static bool may_run_beside_another(void)
{
    static _Thread_local int answer = -1; /* -1: not asked yet */
    cpu_set_t cpus;

    if (answer < 0)
        answer = sched_getaffinity(0, sizeof cpus, &cpus) == 0 &&
                 CPU_COUNT(&cpus) > 1;
    return answer;
}

/* Tell the processor this is a spin loop: it saves power, and leaves the
 * core to its other hardware thread. */
static void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Watch the inbox for up to SPIN_NS (or until `deadline`): true if a
 * request arrived. */
static bool request_arrived_while_spinning(coro_inbox *in, uint64_t deadline)
{
    uint64_t until = coro_now() + SPIN_NS;

    if (until > deadline)
        until = deadline;
    do {
        for (int i = 0; i < SPIN_CHECKS; i++) {
            /* relaxed: a request seen here is only a reason to return;
             * the pump takes it with coro__inbox_take()'s acquire. */
            if (atomic_load_explicit(&in->head, memory_order_relaxed) != NULL)
                return true;
            spin_pause();
        }
    } while (coro_now() < until);
    return false;
}

/* Whether to skip the sleep: spin, if spinning has been paying lately. */
static bool spin_finds_work(coro_inbox *in, uint64_t deadline)
{
    if (in->spin_skip > 0) {
        in->spin_skip--;
        return false;
    }
    if (!may_run_beside_another())
        return false;
    if (request_arrived_while_spinning(in, deadline)) {
        in->spin_backoff = 0;
        return true;
    }
    in->spin_backoff = in->spin_backoff == 0 ? 1 : 2 * in->spin_backoff;
    if (in->spin_backoff > SPIN_BACKOFF_MAX)
        in->spin_backoff = SPIN_BACKOFF_MAX;
    in->spin_skip = in->spin_backoff;
    return false;
}

void coro__inbox_wait(coro_inbox *in, uint64_t deadline)
{
    coro_wake_cell *cell = in->cell;
    uint32_t seen;
    struct timespec until = {
        .tv_sec = (time_t)(deadline / CORO_SEC),
        .tv_nsec = (long)(deadline % CORO_SEC),
    };

    if (in->wait_fn != NULL) {
        wait_in_hook(in, deadline);
        return;
    }
    if (spin_finds_work(in, deadline))
        return;
    seen = atomic_load_explicit(&cell->wake_seq, memory_order_acquire);
    atomic_store_explicit(&cell->sleeping, true, memory_order_seq_cst);
    if (atomic_load_explicit(&in->head, memory_order_seq_cst) == NULL) {
        /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline
         * (no FUTEX_CLOCK_REALTIME flag): the same clock as coro_now(). It
         * returns on a wake, on the deadline, on a signal (EINTR) or at
         * once if wake_seq moved on (EAGAIN); in every case the pump looks
         * again, so a spurious return only costs one more look. */
        syscall(SYS_futex, &cell->wake_seq, FUTEX_WAIT_BITSET_PRIVATE, seen,
                deadline == CORO_FOREVER ? NULL : &until, NULL,
                FUTEX_BITSET_MATCH_ANY);
    }
    atomic_store_explicit(&cell->sleeping, false, memory_order_relaxed);
}

int coro__inbox_set_wait(coro_inbox *in, coro_wait_fn fn, void *arg,
                         int *wake_fd)
{
    coro_wake_cell *cell = in->cell;

    /* The first hook of this cell's life: its eventfd. Non-blocking, so a
     * producer's write and our emptying read never block; close-on-exec,
     * so a child process does not inherit it. */
    if (fn != NULL && cell->event_fd < 0) {
        int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

        if (fd < 0)
            return errno; /* EMFILE, ENFILE, ENOMEM (ENODEV) */
        cell->event_fd = fd;
    }
    in->wait_fn = fn;
    in->wait_arg = arg;
    /* relaxed: the owner is not waiting now; its next seq_cst store of
     * `sleeping` publishes this (see the top of this file). */
    atomic_store_explicit(&cell->wait_fd, fn != NULL ? cell->event_fd : -1,
                          memory_order_relaxed);
    if (wake_fd != NULL)
        *wake_fd = fn != NULL ? cell->event_fd : -1;
    return 0;
}

void coro__inbox_poll_hook(coro_inbox *in)
{
    /* No `sleeping` flag and no emptying: the hook must not block, so no
     * producer needs to wake it. A count left in the eventfd stays for
     * the next real wait (which then returns at once, and empties it). */
    in->wait_fn(in->wait_arg, in->cell->event_fd, 0);
}
