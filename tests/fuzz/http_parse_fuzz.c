/*
 * http_parse_fuzz.c — a libFuzzer target for the capstone's request parser
 * (ch05_shutdown/examples/http_parse.h).
 *
 * libFuzzer calls LLVMFuzzerTestOneInput() millions of times with inputs it
 * makes up, keeping those that reach new code. Built with AddressSanitizer
 * and UndefinedBehaviorSanitizer, any read outside the input, any undefined
 * behaviour and any failed check below stops the run with the input that
 * did it. tests/http_parse_fuzz.sh builds and runs it; see tests/README.md.
 *
 * Each input is treated as the bytes a client sent on one connection. The
 * target reads them the way http_server.c does (its reader is static, so it
 * is repeated here from the public functions): skip blank lines, ask
 * http_head_length() whether a whole head has arrived, hand that head to
 * http_parse_request(), then go on with the bytes behind it (pipelined
 * requests). Heads longer than the server's 8 KiB buffer are not looked at,
 * as the server answers them 431 without parsing.
 *
 * Every call is given bytes that end where their heap block ends (the input
 * itself, which libFuzzer copies into a block of its exact size, or a copy
 * of a prefix), so that AddressSanitizer catches a read even one byte
 * beyond them. The checks are what the functions promise (http_parse.h):
 *
 *   http_line_end      true only for "\n" or "\r\n" at p, inside [p, end);
 *                      the length it reports is that line end's length.
 *   http_head_length   0, or a length within the buffer that ends with the
 *                      first empty line; the same answer whatever arrives
 *                      after it, and 0 for any shorter prefix (the server
 *                      asks again each time more bytes arrive).
 *   http_parse_request a status from 200 to 599; the same answer twice for
 *                      the same bytes; a 200 or 404 only for a GET or HEAD
 *                      of an HTTP/1.x request line, and `head` only for a
 *                      HEAD that is answered.
 */
#define _GNU_SOURCE /* memmem() */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"

/* The server's input buffer (MAX_HEADER_BYTES in http_server.c). */
enum { MAX_HEAD = 8 * 1024 };

/* A failed check: say which, and abort, so libFuzzer keeps the input. */
#define CHECK(condition)                                                     \
    do {                                                                     \
        if (!(condition)) {                                                  \
            fprintf(stderr, "http_parse_fuzz: check failed at line %d: %s\n",\
                    __LINE__, #condition);                                   \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* A heap copy of data[0, n) with nothing readable after it. (malloc(0) may
 * return NULL; one byte is asked for then, and never read.) */
static char *copy_of(const uint8_t *data, size_t n)
{
    char *copy = malloc(n > 0 ? n : 1);

    CHECK(copy != NULL);
    if (n > 0)
        memcpy(copy, data, n);
    return copy;
}

/* http_line_end() at every position of buf[0, n), and at its end. */
static void check_line_ends(const char *buf, size_t n)
{
    const char *end = buf + n;

    for (size_t i = 0; i <= n; i++) {
        const char *p = buf + i;
        size_t length = 99;
        bool expected = (i < n && p[0] == '\n') ||
                        (i + 1 < n && p[0] == '\r' && p[1] == '\n');

        bool found = http_line_end(p, end, &length);
        CHECK(found == expected);
        if (found) {
            CHECK(length == (p[0] == '\n' ? 1u : 2u));
            CHECK(length <= n - i);
        }
    }
}

/* The length of the head that http_head_length() should find: up to the
 * first empty line that follows a "\n" ("\n" or "\r\n"), or 0. Written
 * differently from http_parse.c on purpose, one byte at a time. */
static size_t expected_head_length(const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < n && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < n && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* http_head_length() of buf[0, n), which must end where its allocation
 * ends: checked, and returned. */
static size_t checked_head_length(const char *buf, size_t n)
{
    size_t length = http_head_length(buf, n);

    CHECK(length <= n);
    CHECK(length == expected_head_length(buf, n));
    if (length > 0) {
        CHECK(buf[length - 1] == '\n');
        CHECK(length >= 2);
    }
    return length;
}

/* The same of a prefix data[0, n) of a longer buffer: on a copy of its own,
 * so that a read beyond n is caught. */
static size_t checked_prefix_head_length(const uint8_t *data, size_t n)
{
    char *buf = copy_of(data, n);
    size_t length = checked_head_length(buf, n);

    free(buf);
    return length;
}

static bool starts_with(const char *block, size_t length, const char *text)
{
    size_t n = strlen(text);

    return length >= n && memcmp(block, text, n) == 0;
}

/* http_parse_request() of a complete head data[0, length). */
static void check_request(const uint8_t *data, size_t length)
{
    char *block = copy_of(data, length);
    struct request first = http_parse_request(block, length);
    struct request again = http_parse_request(block, length);
    const char *line_end = memchr(block, '\n', length);
    size_t line = line_end != NULL ? (size_t)(line_end - block) : length;

    CHECK(first.status >= 200 && first.status <= 599);
    CHECK(first.status == again.status && first.head == again.head &&
          first.keep_alive == again.keep_alive);
    if (first.status == 200 || first.status == 404) {
        /* Answered: the method was GET or HEAD, and the request line
         * names an HTTP/1.x version (the first line: "... HTTP/1.x"). */
        CHECK(starts_with(block, length, "GET ") ||
              starts_with(block, length, "HEAD "));
        CHECK(first.head == starts_with(block, length, "HEAD "));
        CHECK(line >= 8 && memmem(block, line, " HTTP/1.", 8) != NULL);
    } else {
        CHECK(!first.head);
    }
    free(block);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* libFuzzer hands each input over in a heap block of exactly `size`
     * bytes, so reading data[size] is caught without a copy. */
    const char *bytes = (const char *)data;
    size_t pos = 0;

    /* The line ends, over the whole input at once. */
    check_line_ends(bytes, size);

    /* The connection's bytes, request after request, as the server reads
     * them. */
    while (pos < size) {
        size_t rest, one, length;

        /* Blank lines before a request line are skipped (as
         * skip_blank_lines() does in http_server.c). */
        while (http_line_end(bytes + pos, bytes + size, &one)) {
            CHECK(one == 1 || one == 2);
            pos += one;
            CHECK(pos <= size);
        }
        rest = size - pos;
        if (rest == 0)
            break;

        /* The head, as the server's buffer holds it: at most 8 KiB. The
         * rest of the input ends where its allocation does; an 8 KiB
         * window of a longer rest gets a copy of its own. */
        if (rest <= MAX_HEAD)
            length = checked_head_length(bytes + pos, rest);
        else
            length = checked_prefix_head_length(data + pos, MAX_HEAD);
        if (length == 0)
            break; /* incomplete: the server would wait, or answer 431 */

        /* Bytes arrive in pieces: every shorter prefix of the head is
         * incomplete, and what follows the head changes nothing. Asking
         * about every prefix would be quadratic, so only a few are. */
        CHECK(checked_prefix_head_length(data + pos, length - 1) == 0);
        CHECK(checked_prefix_head_length(data + pos, length / 2) == 0);
        CHECK(checked_prefix_head_length(data + pos, length) == length);

        check_request(data + pos, length);
        pos += length;
    }
    return 0;
}
