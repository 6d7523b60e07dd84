/* coro.c — a stage_diff fixture: valid but tricky C. {  <- not a brace
 *
 * Every definition below must be found, and nothing else. The expected
 * list is ../base.functions.
 */
#include <stddef.h>
#include <stdio.h>
#include "coro.h"

#define NOTHROW /* an attribute macro: nothing here */
#define BLOCK(x) do { if (x) { (void)0; } } while (0)
#define MAKE_GETTER(name, value) \
    static int name(void) {      \
        return value;            \
    }

// a line comment with a brace {  and a fake signature: int fake(void) {

typedef void *(*work_fn)(void *arg);
typedef int (*table_fn)(int, int);

struct point { int x, y; };
struct point origin = { 0, 0 };
static const struct point corners[] = {
    { 1, 2 },
    { 3, 4 },
};
static int (*const ops[])(int, int) = { 0, 0 };
static char scratch[sizeof(struct point) * 2];

enum colour { RED, GREEN = 2, BLUE };

typedef struct {
    void (*callback)(void *);
    int (*compare)(const void *, const void *);
} handlers;

static const char *braces = "}{ \" } int not_a_function(void) {";
static const char *slashes = "/* not a comment */ // nor this {";
static const char brace_char = '{';
static const char quote_char = '\'';
static const char backslash = '\\';
static const char *joined = "a string that goes on \
over a backslash-newline { ";

static int add(int a, int b)
{
    return a + b;
}

int multi_line_signature(
    int first,
    const char *second,
    void (*callback)(int))
{
    if (second[0] == '}') {
        callback(first);
    }
    BLOCK(first);
    return first;
}

__attribute__((noinline)) static int leading_attribute(void) { return 1; }

static int trailing_attribute(void) __attribute__((unused));
static int trailing_attribute(void) { return "{"[0]; }

static int after_parameters(void) NOTHROW { return 0; }

static inline int
    weird_layout
    (void)
{
    return '}';
}

table_fn pick(int which)
{
    struct point p = { .x = which, .y = 0 };
    (void)corners; (void)scratch; (void)braces; (void)slashes;
    return which ? ops[p.x] : 0;
}

static int (*returns_fn_pointer(int which))(int, int)
{
    return ops[which];
}

static int (parenthesised_name)(int x) { return x; }

_Noreturn void stops(void) { for (;;) { } }

struct point *make_point(void) { return &origin; }

struct point by_value(void)
{
    struct point p = { 1, 2 };
    return p;
}

#if defined(SOMETHING)
int conditional(void) { return 1; }
#else
int conditional(void) { return 2; }
#endif

MAKE_GETTER(generated, 42)

static void after_macro_call(void)
{
    printf("%d %c%c%c %s\n", generated(), brace_char, quote_char, backslash, joined);
}

/* A comment between functions belongs to neither. } */
int last_one(void)
{
    return 0;
} /* trailing */
