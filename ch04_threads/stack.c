/*
 * stack.c — where coroutine stacks come from, and what happens when one
 * runs out.
 *
 *     map                map + page                        map + map_size
 *     │ guard: PROT_NONE │ usable stack (grows down) <──── │
 *     └──────────────────┴─────────────────────────────────┘
 *
 * Every stack is its own mmap: one guard page at the bottom, then the
 * usable bytes. An overflow touches the guard page and faults; the opt-in
 * handler below turns that fault into a message naming the coroutine.
 *
 * Dense stacks (coro_sched_use_dense_stacks()) trade that fault for
 * numbers: stacks are carved side by side from big regions, with a canary
 * just below each instead of a guard page. The canary is the top 16 bytes
 * of the slot below; the lowest stack's is at the end of a lead page:
 *
 *     region: │lead  c│stack 0  c│stack 1  c│stack 2  c│ ...
 *                   └─ canary of stack 0
 *
 * So a stack is its slot less 16 bytes, and its canary lives in a page
 * that is touched anyway: the top page of the stack below, where that
 * coroutine's first frame is. A suspended coroutine that never went deep
 * has touched one page of its own, and checking its canary touches none.
 * (Kept at the bottom of the stack itself, the canary made every stack's
 * bottom page resident, or, where the kernel maps never-written pages to
 * its shared zero page, cost a page fault per coroutine all the same.)
 * The canary holds a pattern written when the stack is carved, so an
 * overflow that writes zeros over it is seen too.
 */
#define _GNU_SOURCE
#include "coro_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

size_t coro__page_size(void)
{
    /* Atomic, because threads may ask at the same time (a plain static
     * would be a data race: undefined behaviour, and ThreadSanitizer says
     * so). relaxed: every thread stores the same value, and nothing else
     * is published with it. */
    static _Atomic size_t cached;
    size_t page = atomic_load_explicit(&cached, memory_order_relaxed);

    if (page == 0) {
        page = (size_t)sysconf(_SC_PAGESIZE);
        atomic_store_explicit(&cached, page, memory_order_relaxed);
    }
    return page;
}

/* ── Stacks ───────────────────────────────────────────────────────────── */

/* The usable size for a request, or 0 if it cannot be represented. */
size_t coro__usable_stack_size(size_t requested)
{
    size_t page = coro__page_size();
    size_t size = requested == 0 ? CORO_STACK_DEFAULT : requested;

    if (size < CORO_STACK_MIN)
        size = CORO_STACK_MIN;
    if (size > SIZE_MAX - 2 * page)
        return 0;
    return (size + page - 1) / page * page;
}

/* Map guard page + stack. Returns 0 or an errno value. */
int coro__stack_map(coro *c, size_t stack_size)
{
    size_t page = coro__page_size();
    size_t map_size = stack_size + page;
    void *map = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

    if (map == MAP_FAILED)
        return ENOMEM;
    if (mprotect(map, page, PROT_NONE) != 0) {
        int err = errno;
        munmap(map, map_size);
        return err;
    }
    c->map = map;
    c->map_size = map_size;
    c->stack_lo = (char *)map + page;
    c->stack_size = stack_size;
    return 0;
}

void coro__stack_unmap(coro *c)
{
    munmap(c->map, c->map_size);
}

/* ── Dense stacks ─────────────────────────────────────────────────────── */

/* Stacks per region: one mmap per 1,024 stacks instead of two per stack. */
enum { DENSE_REGION_STACKS = 1024 };

/* The canary: the 16 bytes just below a dense stack, which keep the
 * pattern written when the stack was carved unless the stack overflows
 * into them. */
enum { CANARY_BYTES = 16 };
static const unsigned char canary_pattern[CANARY_BYTES] = {
    0xc0, 0xde, 0xca, 0xfe, 0x5a, 0xa5, 0x0f, 0xf0,
    0xc0, 0xde, 0xca, 0xfe, 0x5a, 0xa5, 0x0f, 0xf0,
};

struct dense_region {
    struct dense_region *next;
    char *base;   /* the mapping: a lead page, then the stacks' slots */
    size_t size;
};

struct coro_dense {
    pthread_mutex_t lock;         /* coro_go() may carve from any thread */
    size_t stack_size;            /* bytes of each slot: a stack and the
                                     canary of the stack above it */
    struct dense_region *regions; /* newest first */
    size_t carved;                /* stacks carved from the newest region */
    uint32_t numbered;            /* stacks carved in all: the next number */
};

coro_dense *coro__dense_create(size_t stack_size)
{
    coro_dense *d = calloc(1, sizeof *d);

    if (d == NULL)
        return NULL;
    if (pthread_mutex_init(&d->lock, NULL) != 0) {
        free(d);
        return NULL;
    }
    d->stack_size = stack_size;
    return d;
}

/* Map one more region: a lead page (the lowest stack's canary at its
 * end), then the slots. MAP_NORESERVE: pages cost memory only once
 * touched, and a suspended coroutine touches only the top of its stack. */
static int dense_grow(coro_dense *d)
{
    struct dense_region *r;

    /* Every stack of the region must get a number (32 bits, which no
     * process reaches: the regions' mappings run out first). */
    if (d->numbered > UINT32_MAX - DENSE_REGION_STACKS)
        return ENOMEM;
    r = malloc(sizeof *r);
    if (r == NULL)
        return ENOMEM;
    r->size = coro__page_size() + d->stack_size * DENSE_REGION_STACKS;
    r->base = mmap(NULL, r->size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r->base == MAP_FAILED) {
        free(r);
        return ENOMEM;
    }
    r->next = d->regions;
    d->regions = r;
    d->carved = 0;
    return 0;
}

int coro__dense_carve(coro_dense *d, coro *c)
{
    pthread_mutex_lock(&d->lock);
    if (d->regions == NULL || d->carved == DENSE_REGION_STACKS) {
        int err = dense_grow(d);
        if (err != 0) {
            pthread_mutex_unlock(&d->lock);
            return err;
        }
    }
    c->map = NULL;
    c->map_size = 0;
    c->stack_lo = d->regions->base + coro__page_size() +
                  d->carved * d->stack_size;
    c->stack_size = d->stack_size - CANARY_BYTES;
    /* Below stack_lo: the top of the slot below (already touched: its
     * coroutine's first frame is there), or the end of the lead page. */
    memcpy(c->stack_lo - CANARY_BYTES, canary_pattern, CANARY_BYTES);
    c->dense_number = d->numbered++;
    d->carved++;
    pthread_mutex_unlock(&d->lock);
    return 0;
}

/* Under the lock: the check and the change are one step, so another
 * thread's coro_go() carves either before it (and we refuse) or after it
 * (with the new size). */
int coro__dense_resize(coro_dense *d, size_t stack_size)
{
    int err = 0;

    pthread_mutex_lock(&d->lock);
    if (d->regions != NULL)
        err = EBUSY;
    else
        d->stack_size = stack_size;
    pthread_mutex_unlock(&d->lock);
    return err;
}

void coro__dense_destroy(coro_dense *d)
{
    while (d->regions != NULL) {
        struct dense_region *r = d->regions;
        d->regions = r->next;
        munmap(r->base, r->size);
        free(r);
    }
    pthread_mutex_destroy(&d->lock);
    free(d);
}

bool coro__stack_canary_intact(const coro *c)
{
    return memcmp(c->stack_lo - CANARY_BYTES, canary_pattern,
                  CANARY_BYTES) == 0;
}

/* ── The overflow handler ─────────────────────────────────────────────── */

static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool overflow_installed;
static struct sigaction previous_segv, previous_bus;
static size_t overflow_page; /* the page size, read safely in the handler */
static _Thread_local bool has_altstack; /* this thread has a signal stack */
static _Thread_local void *own_altstack; /* ...that we mapped (or NULL) */

enum { ALTSTACK_SIZE = 64 * 1024 };

/* A thread-exit destructor unmaps the alternate stacks we mapped. */
static pthread_once_t altstack_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t altstack_key;

static void altstack_release(void *stack)
{
    stack_t off = {.ss_flags = SS_DISABLE};

    if (sigaltstack(&off, NULL) == 0)
        munmap(stack, ALTSTACK_SIZE);
}

static void altstack_key_create(void)
{
    (void)pthread_key_create(&altstack_key, altstack_release);
}

/* Alternate signal stacks are mmap'd (not malloc'd) and live as long as
 * their thread. A thread that already has one keeps its own. */
static int altstack_ensure(void)
{
    const size_t size = ALTSTACK_SIZE;
    stack_t current, alt;

    if (has_altstack)
        return 0;
    if (sigaltstack(NULL, &current) == 0 && !(current.ss_flags & SS_DISABLE)) {
        has_altstack = true;
        return 0;
    }
    alt.ss_sp = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (alt.ss_sp == MAP_FAILED)
        return ENOMEM;
    alt.ss_size = size;
    alt.ss_flags = 0;
    if (sigaltstack(&alt, NULL) != 0) {
        int err = errno;
        munmap(alt.ss_sp, size);
        return err;
    }
    has_altstack = true;
    own_altstack = alt.ss_sp;
    pthread_once(&altstack_key_once, altstack_key_create);
    pthread_setspecific(altstack_key, alt.ss_sp); /* released at exit */
    return 0;
}

void coro_thread_detach(void)
{
    stack_t off = {.ss_flags = SS_DISABLE};

    if (coro_self() != NULL)
        return; /* a coroutine runs on this thread: keep everything */
    if (own_altstack != NULL && sigaltstack(&off, NULL) == 0) {
        pthread_setspecific(altstack_key, NULL); /* no release at exit */
        munmap(own_altstack, ALTSTACK_SIZE);
        own_altstack = NULL;
    }
    has_altstack = false;
    coro__post_cache_release();
}

/* Async-signal-safe text building: no printf in a signal handler. */
static char *put_text(char *out, const char *text)
{
    while (*text)
        *out++ = *text++;
    return out;
}

static char *put_number(char *out, uintptr_t value, unsigned base)
{
    char digits[3 * sizeof value]; /* 20 decimal digits fit in 24 */
    int n = 0;

    do {
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value != 0);
    while (n > 0)
        *out++ = digits[--n];
    return out;
}

void coro__overflow_abort(const coro *c)
{
    char line[160];
    char *p = line;

    p = put_text(p, "coro: stack overflow in coroutine 0x");
    p = put_number(p, (uintptr_t)c, 16);
    p = put_text(p, " (stack ");
    p = put_number(p, c->stack_size, 10);
    p = put_text(p, " bytes)\n");
    (void)!write(STDERR_FILENO, line, (size_t)(p - line));
    abort();
}

static void overflow_signal(int signo, siginfo_t *info, void *ucontext)
{
    const coro *c = coro_self();
    uintptr_t addr = (uintptr_t)info->si_addr;

    (void)ucontext;
    if (c && c->map && addr >= (uintptr_t)c->map
          && addr < (uintptr_t)c->map + overflow_page) {
        coro__overflow_abort(c);
    }
    /* Not a coroutine overflow: put back whatever handled this signal
     * before us and return. The faulting instruction runs again and meets
     * that handler (or the default action: a core dump). */
    sigaction(signo, signo == SIGSEGV ? &previous_segv : &previous_bus, NULL);
}

int coro_overflow_handler_install(void)
{
    struct sigaction action;
    int err = 0;

    pthread_mutex_lock(&overflow_lock);
    err = altstack_ensure();
    if (err != 0 || atomic_load(&overflow_installed))
        goto out;
    overflow_page = coro__page_size();
    memset(&action, 0, sizeof action);
    action.sa_sigaction = overflow_signal;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, &previous_segv) != 0 ||
        sigaction(SIGBUS, &action, &previous_bus) != 0) {
        err = errno;
        goto out;
    }
    atomic_store(&overflow_installed, true);
out:
    pthread_mutex_unlock(&overflow_lock);
    return err;
}

/* Each thread that runs coroutines needs its own alternate signal stack
 * for the handler to run on. If one cannot be had, an overflow still
 * faults; it is just not reported by name. */
void coro__overflow_prepare_thread(void)
{
    if (!has_altstack && atomic_load_explicit(&overflow_installed,
                                                 memory_order_relaxed))
        (void)altstack_ensure();
}
