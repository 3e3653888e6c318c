/*
 * tune_progress.c - tl_tune_progress_stderr: a tuning run's progress for a
 * person. On a terminal one line is redrawn in place (a bar, the count,
 * the best so far, the time left); into a file or a pipe, where a redrawn
 * line would be noise, each event is a plain line.
 */
#define _POSIX_C_SOURCE 200809L
#include "tilec.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 24

static void format_left(const tl_tune_progress *p, char *buf, size_t len)
{
    if (p->left_s < 0)
        buf[0] = '\0';
    else if (p->left_s < 90)
        snprintf(buf, len, ", about %.0f s left", p->left_s);
    else
        snprintf(buf, len, ", about %.0f min left", p->left_s / 60);
}

static void format_best(const tl_tune_progress *p, char *buf, size_t len)
{
    if (p->best_ms > 0)
        snprintf(buf, len, "best %.4f ms (%s)", p->best_ms, p->best);
    else
        snprintf(buf, len, "no candidate passed yet");
}

static void draw_bar(FILE *f, const tl_tune_progress *p)
{
    char bar[BAR_WIDTH + 1], best[256], left[64];
    int filled = p->total > 0 ? p->done * BAR_WIDTH / p->total : 0;
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    format_best(p, best, sizeof best);
    format_left(p, left, sizeof left);
    /* \r back to the start, \033[K clears what a longer line left */
    fprintf(f, "\r\033[K%-7s [%s] %d/%d  %s%s", p->phase, bar, p->done, p->total, best, left);
    if (strcmp(p->phase, "done") == 0)
        fputc('\n', f);
}

static void plain_line(FILE *f, const tl_tune_progress *p)
{
    char best[256], left[64];
    format_best(p, best, sizeof best);
    format_left(p, left, sizeof left);
    if (strcmp(p->phase, "compile") == 0)
        fprintf(f, "tune: compile: %d/%d candidates (%.1f s)\n", p->done, p->total, p->elapsed_s);
    else if (strcmp(p->phase, "final") == 0)
        fprintf(f, "tune: final round: the %d fastest timed together\n", p->total);
    else
        fprintf(f, "tune: %s: %d/%d measured, %d passed, %s%s\n", p->phase, p->done, p->total, p->passed, best,
                left);
}

TL_API void tl_tune_progress_stderr(void *user, const tl_tune_progress *p)
{
    FILE *f = user ? user : stderr;
    if (!p || !p->phase)
        return;
    if (isatty(fileno(f)))
        draw_bar(f, p);
    else
        plain_line(f, p);
    fflush(f);
}
