/* coro.h — a stage_diff fixture header. */
#ifndef CORO_H
#define CORO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct coro coro;
typedef void *(*coro_fn)(void *arg);
typedef enum { CORO_SUSPENDED, CORO_RUNNING, CORO_NORMAL, CORO_DONE } coro_state;

coro *coro_create(coro_fn fn, void *arg, size_t stack_size);
int coro_resume(coro *c);

/** An inline function in a header counts. */
static inline int coro_is_done(coro_state s)
{
    return s == CORO_DONE;
}

#define coro_not_a_function(c) { (c); }

#ifdef __cplusplus
}
#endif

#endif /* CORO_H */
