/*
 * http_parse.c — the capstone's HTTP/1.1 request parser (RFC 9112), strict
 * enough to be safe. See http_parse.h for what it decides.
 *
 * It works on a complete head that is already in memory, so it never
 * waits, never allocates and has no state between calls: the server
 * (http_server.c) buffers the bytes, asks http_head_length() whether the
 * head has all arrived, then asks http_parse_request() what to answer.
 * Text is handled as spans (a pointer and a length) into that buffer, never
 * copied and never NUL-terminated.
 */
#include "http_parse.h"

#include <ctype.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* A character of a token (a method, a header name): RFC 9110, section
 * 5.6.2. */
static bool is_token_char(char c)
{
    unsigned char ch = (unsigned char)c;

    return isalnum(ch) || (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* ------------------------------------------------------------------------
 * Where a head ends, and whether one is coming at all.
 */

/* "\r\n" and a bare "\n" (RFC 9112, section 2.2, allows it) end a line. */
bool http_line_end(const char *p, const char *end, size_t *length)
{
    if (p < end && p[0] == '\n') {
        *length = 1;
        return true;
    }
    if (p + 1 < end && p[0] == '\r' && p[1] == '\n') {
        *length = 2;
        return true;
    }
    return false;
}

/* The length of the request head at the start of `buf` (the empty line
 * that ends it included), or 0 if it has not all arrived. */
size_t http_head_length(const char *buf, size_t len)
{
    const char *end = buf + len;
    const char *p = buf;
    size_t blank;

    while ((p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        p++; /* the start of the next line: is it empty? */
        if (http_line_end(p, end, &blank))
            return (size_t)(p - buf) + blank;
    }
    return 0;
}

/*
 * Could buf[0, len) be the start of a request line? It is read as far as
 * it goes: a method (token characters), one space, a target (visible
 * characters), one space, "HTTP/" digit "." digit, and the line's end.
 * The first byte that fits none of these answers no: a TLS handshake
 * (it starts with byte 0x16), binary noise or NULs are refused at once,
 * instead of waiting for an empty line that will never come. What this
 * lets through, http_parse_request() still checks in full.
 */
bool http_could_be_request(const char *buf, size_t len)
{
    static const char version[] = "HTTP/#.#"; /* '#': a digit */
    size_t i = 0, start;

    if (len == 1 && buf[0] == '\r')
        return true; /* perhaps an empty line, which is skipped */
    while (i < len && is_token_char(buf[i]))
        i++;
    if (i == len)
        return true;
    if (i == 0 || buf[i] != ' ')
        return false;
    start = ++i;
    while (i < len && (unsigned char)buf[i] > ' ' && buf[i] != 0x7f)
        i++;
    if (i == len)
        return true;
    if (i == start || buf[i] != ' ')
        return false;
    i++;
    for (size_t k = 0; k < sizeof version - 1; k++, i++) {
        if (i == len)
            return true;
        if (version[k] == '#' ? !isdigit((unsigned char)buf[i])
                              : buf[i] != version[k])
            return false;
    }
    if (i == len || buf[i] == '\n')
        return true;
    if (buf[i] != '\r')
        return false;
    return i + 1 == len || buf[i + 1] == '\n';
}

/* ------------------------------------------------------------------------
 * A request head, line by line.
 */

struct span {
    const char *p;
    size_t n;
};

struct request_line {
    struct span method;
    struct span path; /* the target's path and query: "/", "/a?b", or "" */
    int minor;      /* HTTP/1.<minor> */
    bool supported; /* HTTP/1.0 or HTTP/1.1 */
};

struct headers {
    int hosts;
    bool close;      /* Connection: close */
    bool keep_alive; /* Connection: keep-alive */
    bool body;       /* Content-Length other than 0, or Transfer-Encoding */
};

/* The next line of a complete head, without its line end. */
static struct span next_line(const char *block, size_t length, size_t *pos)
{
    const char *start = block + *pos;
    const char *newline = memchr(start, '\n', length - *pos); /* never NULL */
    size_t n = (size_t)(newline - start);

    *pos += n + 1;
    if (n > 0 && start[n - 1] == '\r')
        n--;
    return (struct span){start, n};
}

static struct span trim(struct span s)
{
    while (s.n > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) {
        s.p++;
        s.n--;
    }
    while (s.n > 0 && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t'))
        s.n--;
    return s;
}

static bool span_is(struct span s, const char *text)
{
    return s.n == strlen(text) && memcmp(s.p, text, s.n) == 0;
}

static bool span_is_nocase(struct span s, const char *text)
{
    return s.n == strlen(text) && strncasecmp(s.p, text, s.n) == 0;
}

/* A token: one or more token characters. */
static bool is_token(struct span s)
{
    if (s.n == 0)
        return false;
    for (size_t i = 0; i < s.n; i++)
        if (!is_token_char(s.p[i]))
            return false;
    return true;
}

/* Visible characters and spaces; no control character but tab. */
static bool is_field_value(struct span s)
{
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];

        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

/* Whether `s` starts with `prefix`, ignoring case. */
static bool starts_with_nocase(struct span s, const char *prefix)
{
    return s.n >= strlen(prefix) && strncasecmp(s.p, prefix, strlen(prefix)) == 0;
}

/*
 * The path of a request target (RFC 9112, section 3.2). Two forms reach
 * an origin server: the origin form, "/path?query", which is its own
 * path; and the absolute form, "http://host:port/path?query", which a
 * client sends to a proxy and a server must accept too (section 3.2.2).
 * Its path is what follows the host, and may be empty (it means "/").
 * False for anything else.
 */
static bool target_path(struct span target, struct span *path)
{
    size_t skip, host_end;

    for (size_t i = 0; i < target.n; i++)
        if ((unsigned char)target.p[i] <= ' ' || target.p[i] == 0x7f)
            return false;
    if (target.n > 0 && target.p[0] == '/') {
        *path = target;
        return true;
    }
    if (starts_with_nocase(target, "http://"))
        skip = strlen("http://");
    else if (starts_with_nocase(target, "https://"))
        skip = strlen("https://");
    else
        return false;
    /* The host (and port) runs up to the path or the query. */
    host_end = skip;
    while (host_end < target.n && target.p[host_end] != '/' &&
           target.p[host_end] != '?')
        host_end++;
    if (host_end == skip)
        return false; /* no host: "http:///" */
    *path = (struct span){target.p + host_end, target.n - host_end};
    return true;
}

/* "GET /path HTTP/1.1": single spaces, an origin-form or absolute-form
 * target. */
static bool parse_request_line(struct span line, struct request_line *rl)
{
    const char *end = line.p + line.n;
    const char *space1 = memchr(line.p, ' ', line.n);
    const char *space2;
    struct span target, version;

    if (space1 == NULL)
        return false;
    space2 = memchr(space1 + 1, ' ', (size_t)(end - space1 - 1));
    if (space2 == NULL)
        return false;
    rl->method = (struct span){line.p, (size_t)(space1 - line.p)};
    target = (struct span){space1 + 1, (size_t)(space2 - space1 - 1)};
    version = (struct span){space2 + 1, (size_t)(end - space2 - 1)};
    if (!is_token(rl->method) || !target_path(target, &rl->path))
        return false;
    if (version.n != 8 || memcmp(version.p, "HTTP/", 5) != 0 ||
        !isdigit((unsigned char)version.p[5]) || version.p[6] != '.' ||
        !isdigit((unsigned char)version.p[7]))
        return false;
    rl->minor = version.p[7] - '0';
    rl->supported = version.p[5] == '1' && rl->minor <= 1;
    return true;
}

/* "Connection: close, Upgrade": a comma-separated list of options. */
static void parse_connection(struct span value, struct headers *h)
{
    size_t start = 0;

    while (start <= value.n) {
        const char *comma = memchr(value.p + start, ',', value.n - start);
        size_t end = comma != NULL ? (size_t)(comma - value.p) : value.n;
        struct span option = trim((struct span){value.p + start, end - start});

        if (span_is_nocase(option, "close"))
            h->close = true;
        else if (span_is_nocase(option, "keep-alive"))
            h->keep_alive = true;
        start = end + 1;
    }
}

/* A length of zero is the only body this server accepts. */
static bool is_zero(struct span value)
{
    if (value.n == 0)
        return false;
    for (size_t i = 0; i < value.n; i++)
        if (value.p[i] != '0')
            return false;
    return true;
}

/* "Name: value". False for a malformed line — among them "Name : value"
 * and obsolete line folding (a line that starts with a space): a space is
 * not part of a token. */
static bool parse_header(struct span line, struct headers *h)
{
    const char *colon = memchr(line.p, ':', line.n);
    struct span name, value;

    if (colon == NULL)
        return false;
    name = (struct span){line.p, (size_t)(colon - line.p)};
    value = trim((struct span){colon + 1, line.n - name.n - 1});
    if (!is_token(name) || !is_field_value(value))
        return false;
    if (span_is_nocase(name, "host"))
        h->hosts++;
    else if (span_is_nocase(name, "connection"))
        parse_connection(value, h);
    else if (span_is_nocase(name, "content-length"))
        h->body |= !is_zero(value);
    else if (span_is_nocase(name, "transfer-encoding"))
        h->body = true;
    return true;
}

/* Is the path "/" (a query string is ignored; "" is "/" too)? */
static bool is_root(struct span path)
{
    if (path.n > 0 && path.p[0] == '/') {
        path.p++;
        path.n--;
    }
    return path.n == 0 || path.p[0] == '?';
}

struct request http_parse_request(const char *block, size_t length)
{
    struct request req = {.status = 400}; /* until proven otherwise */
    struct request_line rl;
    struct headers h = {0};
    size_t pos = 0;

    if (!parse_request_line(next_line(block, length, &pos), &rl))
        return req;
    if (!rl.supported) {
        req.status = 505;
        return req;
    }
    for (;;) {
        struct span line = next_line(block, length, &pos);

        if (line.n == 0)
            break;
        if (!parse_header(line, &h))
            return req;
    }
    if (rl.minor == 1 && h.hosts != 1)
        return req; /* HTTP/1.1 requires exactly one Host */
    if (!span_is(rl.method, "GET") && !span_is(rl.method, "HEAD")) {
        req.status = 405;
        return req;
    }
    if (h.body)
        return req;
    req.head = span_is(rl.method, "HEAD");
    req.keep_alive = rl.minor == 1 ? !h.close : h.keep_alive && !h.close;
    req.status = is_root(rl.path) ? 200 : 404;
    return req;
}
