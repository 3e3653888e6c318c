/* util.c - small helpers: bounded formatting, growable strings, a clock. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *tli_fmt(char *dst, size_t n, const char *fmt, ...)
{
    if (!dst || n == 0)
        return dst;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    return dst;
}

char *tli_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void tli_str_init(tli_str *s) { memset(s, 0, sizeof *s); }

void tli_str_free(tli_str *s)
{
    free(s->data);
    tli_str_init(s);
}

static bool str_reserve(tli_str *s, size_t extra)
{
    if (s->oom)
        return false;
    if (s->len + extra + 1 <= s->cap)
        return true;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < s->len + extra + 1)
        cap *= 2;
    char *d = realloc(s->data, cap);
    if (!d) {
        s->oom = true;
        return false;
    }
    s->data = d;
    s->cap = cap;
    return true;
}

void tli_str_append(tli_str *s, const char *text)
{
    size_t n = strlen(text);
    if (!str_reserve(s, n))
        return;
    memcpy(s->data + s->len, text, n + 1);
    s->len += n;
}

void tli_str_vappendf(tli_str *s, const char *fmt, va_list ap)
{
    /* print into the room there is (a first buffer for a new string);
     * only a text that does not fit is measured and printed again:
     * formatting is most of what the emitter does */
    if (s->oom || (!s->cap && !str_reserve(s, 0)))
        return;
    size_t room = s->cap > s->len ? s->cap - s->len : 0;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(room ? s->data + s->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (n < 0 || (size_t)n >= room) {
        if (room)
            s->data[s->len] = '\0'; /* what did not fit left a piece */
        if (n < 0 || !str_reserve(s, (size_t)n))
            return;
        vsnprintf(s->data + s->len, (size_t)n + 1, fmt, ap);
    }
    s->len += (size_t)n;
}

void tli_str_appendf(tli_str *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tli_str_vappendf(s, fmt, ap);
    va_end(ap);
}

char *tli_str_take(tli_str *s)
{
    if (s->oom) {
        tli_str_free(s);
        return NULL;
    }
    if (!s->data && !str_reserve(s, 0))
        return NULL;
    if (s->len == 0)
        s->data[0] = '\0';
    char *d = s->data;
    tli_str_init(s);
    return d;
}

double tli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
