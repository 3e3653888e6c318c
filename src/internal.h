/*
 * internal.h - declarations shared by the library's own files. Internal
 * symbols are named tli_* and are hidden (-fvisibility=hidden); only the tl_*
 * functions of tilec.h are exported.
 */
#ifndef TILEC_INTERNAL_H
#define TILEC_INTERNAL_H

#include "tilec.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define TLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TLI_PRINTF(a, b)
#endif

/* snprintf that always terminates and never overflows; returns dst. */
char *tli_fmt(char *dst, size_t n, const char *fmt, ...) TLI_PRINTF(3, 4);
/* strdup/malloc that the library uses everywhere (NULL on failure). */
char *tli_strdup(const char *s);
/* A growable string for emitters and messages. */
typedef struct tli_str {
    char *data;
    size_t len, cap;
    bool oom; /* an append failed; data holds what fit */
} tli_str;
void tli_str_init(tli_str *s);
void tli_str_free(tli_str *s);
void tli_str_append(tli_str *s, const char *text);
void tli_str_appendf(tli_str *s, const char *fmt, ...) TLI_PRINTF(2, 3);
void tli_str_vappendf(tli_str *s, const char *fmt, va_list ap);
/* Takes the buffer (caller frees); s is empty after. NULL on OOM. */
char *tli_str_take(tli_str *s);

/* Monotonic wall clock in milliseconds. */
double tli_now_ms(void);

#endif
