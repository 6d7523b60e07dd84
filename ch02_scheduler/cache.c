/*
 * cache.c — where a scheduler's coroutines get their stacks.
 *
 *   coro_go / coro_spawn ──shell_get──> a cached coroutine, or a new one
 *                                        (guarded stack, or dense)
 *   finished / destroyed ──shell_put──> the cache (past its limit: freed)
 *
 * Mapping a stack is a system call or two (mmap, mprotect for the guard
 * page); a finished coroutine keeps its stack, so the next coroutine can
 * take over the whole "shell" — struct and stack — with no system call.
 * The cache holds guarded stacks of the current size only: changing the
 * size (coro_sched_set_stack_size()) flushes it. Dense stacks
 * (coro_sched_use_dense_stacks(); carved side by side by stack.c) are
 * always kept.
 *
 * Which cached shell goes next? Guarded ones wait on a list, and the
 * newest goes first: when one coroutine ends and the next begins, the
 * stack it gets is still in the CPU's caches. Dense ones are numbered as
 * they are carved, and the lowest number goes first. A million sleepers
 * end in the order of their deadlines, which is random; a list in that
 * order would hand the next million stacks out scattered over 15 GiB (at
 * 16 KiB each), and each coro_go and each first run would pay a TLB miss
 * and a walk of the page tables of its own. Lowest first walks memory in order again, as the
 * carving did (within a region, numbers are addresses: allocators call
 * this address-ordered first fit), and keeps the stacks in use packed
 * among the first carved.
 *
 * Owns: the cache, the stack size and the dense object of struct
 * coro_sched. Thread: the scheduler's owner only.
 */
#include "sched_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Finished guarded stacks kept for reuse, at most (64 MiB of address
 * space at the default size). Dense stacks are always kept. */
enum { STACK_CACHE_MAX = 1024 };

/* ── Dense stacks, lowest number first ────────────────────────────────────
 *
 * Two levels of bits: a bit per stack (in `free`), and a bit per word of
 * those (in `nonzero`). Taking the lowest is a find-first-set in each
 * level. `lowest` skips the words of `nonzero` known to be zero, so
 * taking stacks in order costs O(1) each; the worst case is one scan of
 * `nonzero`, a word per 4,096 stacks.
 */

enum { WORD_BITS = 64, NUMBERS_PER_NONZERO_WORD = WORD_BITS * WORD_BITS };

static uint64_t bit(size_t index)
{
    return (uint64_t)1 << (index % WORD_BITS);
}

/* Make room for dense stack `number`. false if out of memory: the arrays
 * may have grown, but `numbers` has not. */
static bool dense_cache_make_room(struct dense_cache *dc, size_t number)
{
    size_t numbers = dc->numbers ? dc->numbers : NUMBERS_PER_NONZERO_WORD;
    size_t old_words = dc->numbers / WORD_BITS;
    size_t old_nonzero = dc->numbers / NUMBERS_PER_NONZERO_WORD;
    void *grown;

    if (number < dc->numbers)
        return true;
    while (numbers <= number)
        numbers *= 2;
    if ((grown = realloc(dc->shell, numbers * sizeof *dc->shell)) == NULL)
        return false;
    dc->shell = grown;
    if ((grown = realloc(dc->free, numbers / WORD_BITS * sizeof(uint64_t)))
        == NULL)
        return false;
    dc->free = grown;
    if ((grown = realloc(dc->nonzero, numbers / NUMBERS_PER_NONZERO_WORD *
                                      sizeof(uint64_t))) == NULL)
        return false;
    dc->nonzero = grown;
    memset(dc->free + old_words, 0,
           (numbers / WORD_BITS - old_words) * sizeof(uint64_t));
    memset(dc->nonzero + old_nonzero, 0,
           (numbers / NUMBERS_PER_NONZERO_WORD - old_nonzero) *
               sizeof(uint64_t));
    dc->numbers = numbers;
    return true;
}

/* Keep the finished dense shell `c`. false if out of memory. */
static bool dense_cache_put(struct dense_cache *dc, coro *c)
{
    size_t number = c->dense_number;
    size_t word = number / WORD_BITS;
    size_t nonzero_word = word / WORD_BITS;

    if (!dense_cache_make_room(dc, number))
        return false;
    dc->shell[number] = c;
    dc->free[word] |= bit(number);
    dc->nonzero[nonzero_word] |= bit(word);
    if (nonzero_word < dc->lowest)
        dc->lowest = nonzero_word;
    return true;
}

/* Take the cached dense shell with the lowest number, or NULL. */
static coro *dense_cache_take_lowest(struct dense_cache *dc)
{
    size_t end = dc->numbers / NUMBERS_PER_NONZERO_WORD;
    size_t word, number;

    while (dc->lowest < end && dc->nonzero[dc->lowest] == 0)
        dc->lowest++;
    if (dc->lowest == end)
        return NULL;
    word = dc->lowest * WORD_BITS +
           (size_t)__builtin_ctzll(dc->nonzero[dc->lowest]);
    number = word * WORD_BITS + (size_t)__builtin_ctzll(dc->free[word]);
    dc->free[word] &= ~bit(number);
    if (dc->free[word] == 0)
        dc->nonzero[dc->lowest] &= ~bit(word);
    return dc->shell[number];
}

/* ── Shells ───────────────────────────────────────────────────────────── */

void coro__shell_free(coro *c)
{
    coro__stack_destroyed(c);
    if (c->map != NULL)
        coro__stack_unmap(c);
    free(c);
}

coro *coro__shell_new(coro_sched *s)
{
    coro *c = calloc(1, sizeof *c);
    int err;

    if (c == NULL)
        return NULL;
    err = s->dense ? coro__dense_carve(s->dense, c)
                   : coro__stack_map(c, s->stack_size);
    if (err != 0) {
        free(c);
        return NULL;
    }
    coro__stack_created(c);
    return c;
}

coro *coro__shell_get(coro_sched *s, bool *reused)
{
    coro *c = s->cache;

    if (c != NULL) {
        s->cache = c->next_free;
        s->cached--;
        *reused = true;
        return c;
    }
    c = dense_cache_take_lowest(&s->dense_cache);
    if (c != NULL) {
        *reused = true;
        return c;
    }
    *reused = false;
    return coro__shell_new(s);
}

void coro__shell_put(coro_sched *s, coro *c)
{
    if (c->map == NULL && dense_cache_put(&s->dense_cache, c))
        return;
    /* Guarded, or dense with no memory left to number it: the list. */
    if (s->dense == NULL &&
        (s->cached >= STACK_CACHE_MAX || c->stack_size != s->stack_size)) {
        coro__shell_free(c);
        return;
    }
    c->next_free = s->cache;
    s->cache = c;
    s->cached++;
}

void coro__cache_flush(coro_sched *s)
{
    coro *c;

    while (s->cache != NULL) {
        c = s->cache;
        s->cache = c->next_free;
        coro__shell_free(c);
    }
    s->cached = 0;
    while ((c = dense_cache_take_lowest(&s->dense_cache)) != NULL)
        coro__shell_free(c);
    free(s->dense_cache.shell);
    free(s->dense_cache.free);
    free(s->dense_cache.nonzero);
    memset(&s->dense_cache, 0, sizeof s->dense_cache);
}

int coro_sched_set_stack_size(coro_sched *s, size_t stack_size)
{
    size_t usable = coro__usable_stack_size(stack_size);

    if (s == NULL || usable == 0)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->dense != NULL) {
        /* In place: the dense object is never replaced, so dense mode
         * stays on whatever happens here. */
        int err = coro__dense_resize(s->dense, usable);
        if (err != 0)
            return err;
    }
    s->stack_size = usable;
    coro__cache_flush(s);
    return 0;
}

int coro_sched_use_dense_stacks(coro_sched *s)
{
    if (s == NULL)
        return EINVAL;
    if (s->owner != coro__thread_id())
        return EPERM;
    if (s->dense != NULL)
        return 0;
    if (s->alive > 0 || s->handles > 0)
        return EBUSY; /* guarded stacks in use */
    coro__cache_flush(s);
    s->dense = coro__dense_create(s->stack_size);
    return s->dense != NULL ? 0 : ENOMEM;
}
