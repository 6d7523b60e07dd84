/*
 * http_parse.h — the capstone's request parser: from the bytes of a
 * request head to the answer it gets. Pure functions of their input; no
 * I/O, no allocation, safe from any thread.
 */
#ifndef HTTP_PARSE_H
#define HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* The answer a request head gets. */
struct request {
    int status;      /* the answer: 200, 404, or the error found */
    bool head;       /* HEAD: the same answer without its body */
    bool keep_alive; /* the connection stays open after the answer */
};

/* Whether a line ends at `p` (before `end`): "\r\n", or a bare "\n" (RFC
 * 9112, section 2.2, allows it). If so, *length is its length, 2 or 1. */
bool http_line_end(const char *p, const char *end, size_t *length);

/* The length of the request head at the start of buf[0, len), the empty
 * line that ends it included, or 0 if it has not all arrived. */
size_t http_head_length(const char *buf, size_t len);

/* Whether buf[0, len), the start of a request head not yet complete (empty
 * lines before it already skipped), could still become a request line:
 * false as soon as a byte rules it out (then the answer is a 400 at once).
 * Nothing is decided about the headers: http_parse_request() does that. */
bool http_could_be_request(const char *buf, size_t len);

/* Decide the answer to the complete head block[0, length), as measured by
 * http_head_length(): 200 for GET or HEAD of "/" (a query string is
 * ignored; the target may be in origin form, "/", or absolute form,
 * "http://host/"), 404 for another path, 405 for another method, 505 for a
 * version other than HTTP/1.0 and 1.1, 400 for anything malformed, for a
 * request announcing a body, and for HTTP/1.1 without exactly one Host.
 * keep_alive follows the version and the Connection header. */
struct request http_parse_request(const char *block, size_t length);

#endif
