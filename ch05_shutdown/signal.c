/*
 * signal.c — close a scheduler when the process gets a signal.
 *
 * A signal handler interrupts a thread at any instruction: in the middle
 * of malloc(), holding a lock, halfway through a ready-queue update. So
 * the handler may only do what is safe at any instruction — the POSIX list
 * of async-signal-safe functions, and lock-free atomic operations. Ours
 * does three things, all of that kind:
 *
 *   handler(signo):  for each scheduler registered for signo:
 *                        closed = true                      (atomic store)
 *                        push its embedded close request    (CAS loop)
 *                        wake its pump if it sleeps         (futex or write(2))
 *
 * Everything else — cancelling every coroutine — is done later by the
 * scheduler's own pump, on its own thread, when it takes the request in
 * (remote.c). The close request is embedded in the scheduler, so the
 * handler never allocates; an exchange on `close_sent` makes sure it is
 * pushed at most once.
 *
 * The registry is a fixed table. Changing it takes a mutex (never taken
 * by the handler). The handler reads it with atomics, and counts itself
 * in `handlers_running`, so that coro__signal_forget() can wait until no
 * handler still holds a scheduler it is about to free.
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>

enum { REGISTRATIONS_MAX = 64 };

struct registration {
    _Atomic int signo;           /* 0: the slot is free */
    _Atomic(coro_sched *) sched;
};

static struct registration registry[REGISTRATIONS_MAX];
static _Atomic size_t registered;      /* slots in use */
static _Atomic int handlers_running;

/* Guarded by registry_lock: the table's changes and, per signal, how many
 * slots use it and the disposition to restore when none does. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t users[NSIG];
static struct sigaction previous[NSIG];

static void close_registered(int signo)
{
    int saved_errno = errno; /* the interrupted code may be reading it */

    atomic_fetch_add(&handlers_running, 1);
    for (size_t i = 0; i < REGISTRATIONS_MAX; i++) {
        if (atomic_load(&registry[i].signo) != signo)
            continue;
        coro_sched *s = atomic_load(&registry[i].sched);
        if (s != NULL)
            coro__sched_close_async(s, signo);
    }
    atomic_fetch_sub(&handlers_running, 1);
    errno = saved_errno;
}

/* Whether `signo` may close a scheduler: catchable, and not a fault. */
static bool signal_allowed(int signo)
{
    switch (signo) {
    case SIGKILL: case SIGSTOP: /* cannot be caught */
    case SIGSEGV: case SIGBUS: case SIGILL: case SIGFPE: /* faults */
        return false;
    default:
        return signo > 0 && signo < NSIG;
    }
}

/* The slot holding (s, signo), or a free one if `free_one`; NULL if none.
 * Under registry_lock. */
static struct registration *find_slot(coro_sched *s, int signo, bool free_one)
{
    for (size_t i = 0; i < REGISTRATIONS_MAX; i++) {
        struct registration *r = &registry[i];
        int slot_signo = atomic_load(&r->signo);

        if (free_one ? slot_signo == 0
                     : slot_signo == signo && atomic_load(&r->sched) == s)
            return r;
    }
    return NULL;
}

/* Install the handler for `signo` if this is its first user. Under lock. */
static int handler_acquire(int signo)
{
    struct sigaction action;

    if (users[signo] > 0) {
        users[signo]++;
        return 0;
    }
    memset(&action, 0, sizeof action);
    action.sa_handler = close_registered;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(signo, &action, &previous[signo]) != 0)
        return EINVAL; /* e.g. a signal the C library keeps for itself */
    users[signo] = 1;
    return 0;
}

/* Restore the previous disposition when the last user goes. Under lock. */
static void handler_release(int signo)
{
    if (--users[signo] == 0)
        sigaction(signo, &previous[signo], NULL);
}

int coro_sched_close_on_signal(coro_sched *s, int signo)
{
    struct registration *slot;
    int err = 0;

    if (s == NULL || !signal_allowed(signo))
        return EINVAL;
    pthread_mutex_lock(&registry_lock);
    if (find_slot(s, signo, false) != NULL)
        goto out; /* already registered */
    slot = find_slot(s, signo, true);
    if (slot == NULL) {
        err = EAGAIN;
        goto out;
    }
    err = handler_acquire(signo);
    if (err != 0)
        goto out;
    /* The scheduler first, then the signal number that makes the handler
     * look at the slot. */
    atomic_store(&slot->sched, s);
    atomic_store(&slot->signo, signo);
    atomic_fetch_add(&registered, 1);
out:
    pthread_mutex_unlock(&registry_lock);
    return err;
}

void coro__signal_forget(coro_sched *s)
{
    if (atomic_load(&registered) == 0)
        return; /* the common case: nothing to look through, no lock */
    pthread_mutex_lock(&registry_lock);
    for (size_t i = 0; i < REGISTRATIONS_MAX; i++) {
        struct registration *r = &registry[i];
        int signo = atomic_load(&r->signo);

        if (signo == 0 || atomic_load(&r->sched) != s)
            continue;
        atomic_store(&r->signo, 0);
        atomic_store(&r->sched, NULL);
        atomic_fetch_sub(&registered, 1);
        handler_release(signo);
    }
    /* A handler that read a slot before we cleared it may still be using
     * `s`. seq_cst on both sides: a handler we do not see counted here
     * started after our stores, so it reads the cleared slots. We wait
     * before unlocking: until then no thread can reuse the slots we
     * cleared, so a late handler can never read a new scheduler from a
     * slot it matched to the old signal (models/signal.pml found that: a
     * scheduler closed by a signal it never registered for). Handlers
     * never take the lock, so this cannot deadlock. */
    while (atomic_load(&handlers_running) != 0)
        sched_yield();
    pthread_mutex_unlock(&registry_lock);
}
