/*
 * tune_db.c - the tuning database: the best configuration per (op, dtypes,
 * layout, shape class, GPU, library version), in one text file beside the
 * cubin cache, shared by every process of the user.
 *
 * File: <cache dir>/tune.db, lines of text:
 *
 *   tilec-tune-db 1                          the first line, always
 *   # ...                                    comments (written: a legend)
 *   op TAB dtypes TAB layout TAB shape class TAB gpu TAB version TAB
 *     config TAB ms TAB ratio TAB shape TAB when      one record per line
 *
 * e.g. "gemm  bf16->bf16  nt  m4096,n4096,k4096  NVIDIA H200  0.1.0
 * bm=128 bn=256 bk=64 st=4 th=256 sw=8 wp=0 pp=0  0.195900  0.8860
 * 4096x4096x4096  1764460800" (tabs between the fields). No field holds a
 * tab or a line break (they are written as spaces). Records of ops,
 * GPUs and versions this library does not use are kept as they are.
 *
 * Writers take an exclusive flock on <dir>/tune.db.lock, read the file,
 * change it in memory, write it to a temporary file in the same directory
 * and rename that over tune.db, so a reader (who takes no lock) sees the
 * old file or the new one, never a mix, and no writer's record is lost to
 * another's. A file that does not start with the header line (foreign) or
 * has lines that do not parse (damaged) is rebuilt from its valid lines,
 * with a warning through the log callback.
 */
#include "tune.h"

#include "cache.h"
#include "ctx.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define DB_HEADER "tilec-tune-db 1"
#define DB_NAME "tune.db"
#define DB_MAX_BYTES (16 << 20) /* larger than any real database: foreign */
#define NFIELDS 11
#define PATH_MAX_LEN 1200

struct tli_tune_db {
    bool loaded;
    char path[PATH_MAX_LEN]; /* "" when the disk cache is off */
    tl_tune_record *recs;    /* what the file held at the first lookup,
                                plus what this context saved since        */
    int n, cap;
};

/* ------------------------------------------------------------------------ */
/* Records as lines                                                          */
/* ------------------------------------------------------------------------ */

static bool same_key(const tl_tune_record *a, const tl_tune_record *b)
{
    return strcmp(a->op, b->op) == 0 && strcmp(a->dtypes, b->dtypes) == 0 && strcmp(a->layout, b->layout) == 0 &&
           strcmp(a->shape_class, b->shape_class) == 0 && strcmp(a->gpu, b->gpu) == 0 &&
           strcmp(a->version, b->version) == 0;
}

/* Copies a field, with tabs and line breaks turned into spaces. */
static void clean(char *dst, size_t len, const char *src)
{
    tli_fmt(dst, len, "%s", src);
    for (char *p = dst; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r')
            *p = ' ';
}

static void write_record(FILE *f, const tl_tune_record *r)
{
    char t[7][160];
    const char *src[7] = {r->op, r->dtypes, r->layout, r->shape_class, r->gpu, r->version, r->config};
    for (int i = 0; i < 7; i++)
        clean(t[i], sizeof t[i], src[i]);
    char shape[64];
    clean(shape, sizeof shape, r->shape);
    fprintf(f, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.6f\t%.4f\t%s\t%lld\n", t[0], t[1], t[2], t[3], t[4], t[5], t[6], r->ms,
            r->ratio, shape, (long long)r->when);
}

static bool take_text(char *dst, size_t len, const char *src)
{
    if (!*src || strlen(src) >= len)
        return false;
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

static bool take_number(const char *src, double *out)
{
    char *end;
    *out = strtod(src, &end);
    return *src && *end == '\0' && isfinite(*out) && *out >= 0;
}

/* A record from one line (without its newline); false when it does not
 * parse. The configuration must at least read as "name=value ...". */
static bool parse_record(char *line, tl_tune_record *r)
{
    char *f[NFIELDS];
    int n = 0;
    for (char *p = line; n < NFIELDS; n++) {
        f[n] = p;
        char *tab = strchr(p, '\t');
        if (!tab) {
            n++;
            break;
        }
        *tab = '\0';
        p = tab + 1;
    }
    if (n != NFIELDS || strchr(f[NFIELDS - 1], '\t'))
        return false;
    memset(r, 0, sizeof *r);
    double when;
    tl_tune_config c;
    return take_text(r->op, sizeof r->op, f[0]) && take_text(r->dtypes, sizeof r->dtypes, f[1]) &&
           take_text(r->layout, sizeof r->layout, f[2]) && take_text(r->shape_class, sizeof r->shape_class, f[3]) &&
           take_text(r->gpu, sizeof r->gpu, f[4]) && take_text(r->version, sizeof r->version, f[5]) &&
           take_text(r->config, sizeof r->config, f[6]) && tli_tune_config_parse(NULL, r->config, &c) &&
           take_number(f[7], &r->ms) && r->ms > 0 && take_number(f[8], &r->ratio) &&
           take_text(r->shape, sizeof r->shape, f[9]) && take_number(f[10], &when) && (r->when = (int64_t)when, true);
}

/* ------------------------------------------------------------------------ */
/* Reading the file                                                          */
/* ------------------------------------------------------------------------ */

static bool push(tl_tune_record **v, int *n, int *cap, const tl_tune_record *r)
{
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        tl_tune_record *nv = realloc(*v, (size_t)c * sizeof *nv);
        if (!nv)
            return false;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = *r;
    return true;
}

/* The whole file, NUL-terminated; NULL with *err = 0 when there is none. */
static char *slurp(const char *path, int *err, size_t *len)
{
    *err = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        *err = errno == ENOENT ? 0 : errno;
        return NULL;
    }
    char *buf = malloc(DB_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, DB_MAX_BYTES + 1, f) : 0;
    if (!buf || ferror(f))
        *err = buf ? EIO : ENOMEM;
    fclose(f);
    if (*err) {
        free(buf);
        return NULL;
    }
    buf[n > DB_MAX_BYTES ? DB_MAX_BYTES : n] = '\0';
    *len = n;
    return buf;
}

typedef struct parsed {
    tl_tune_record *recs;
    int n, cap;
    int bad_lines;      /* lines that did not parse                       */
    int first_bad;      /* the first one's number (1-based)               */
    bool foreign;       /* no header line, a NUL byte, or far too large   */
} parsed;

static tl_status parse_text(char *text, size_t len, parsed *out)
{
    if (len > DB_MAX_BYTES || strlen(text) != len || strncmp(text, DB_HEADER "\n", strlen(DB_HEADER) + 1) != 0) {
        out->foreign = true;
        return TL_OK;
    }
    int lineno = 1;
    for (char *line = strchr(text, '\n') + 1; *line; lineno++) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        tl_tune_record r;
        if (*line && *line != '#' && !parse_record(line, &r)) {
            if (!out->bad_lines++)
                out->first_bad = lineno + 1;
        } else if (*line && *line != '#' && !push(&out->recs, &out->n, &out->cap, &r)) {
            return TL_ERR_OUT_OF_MEMORY;
        }
        if (!end)
            break;
        line = end + 1;
    }
    return TL_OK;
}

static void db_path(const char *dir, const char *name, char *out)
{
    tli_fmt(out, PATH_MAX_LEN, "%s/%s", dir, name);
}

static tl_status read_parsed(const char *dir, parsed *out)
{
    memset(out, 0, sizeof *out);
    char path[PATH_MAX_LEN];
    db_path(dir, DB_NAME, path);
    int err;
    size_t len = 0;
    char *text = slurp(path, &err, &len);
    if (!text)
        return err == ENOMEM ? TL_ERR_OUT_OF_MEMORY : err ? TL_ERR_IO : TL_OK;
    tl_status st = parse_text(text, len, out);
    free(text);
    return st;
}

static void warn_damage(const char *dir, const parsed *p, tl_log_fn log, void *log_user)
{
    if (!log)
        return;
    char msg[1600];
    if (p->foreign)
        tli_fmt(msg, sizeof msg, "tuning database %s/" DB_NAME " is not a tilec tuning database (no '" DB_HEADER
                "' line); rebuilding it empty", dir);
    else
        tli_fmt(msg, sizeof msg, "tuning database %s/" DB_NAME ": %d line%s that do not parse (the first: line "
                "%d); rebuilding it from the %d valid records", dir, p->bad_lines, p->bad_lines == 1 ? "" : "s",
                p->first_bad, p->n);
    log(log_user, TL_LOG_WARN, msg);
}

/* ------------------------------------------------------------------------ */
/* Writing the file                                                          */
/* ------------------------------------------------------------------------ */

/* An exclusive lock held for a read-modify-write; -1 and errno on failure. */
static int lock_db(const char *dir)
{
    char path[PATH_MAX_LEN];
    db_path(dir, DB_NAME ".lock", path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
    }
    return fd;
}

static void unlock_db(int fd)
{
    flock(fd, LOCK_UN);
    close(fd);
}

static tl_status write_file(const char *dir, const tl_tune_record *recs, int n)
{
    char tmp[PATH_MAX_LEN], path[PATH_MAX_LEN];
    db_path(dir, DB_NAME ".tmp-XXXXXX", tmp);
    db_path(dir, DB_NAME, path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return TL_ERR_IO;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return TL_ERR_IO;
    }
    fprintf(f, "%s\n# op\tdtypes\tlayout\tshape class\tgpu\tlibtilec\tconfig\tms\tratio\tshape\twhen\n", DB_HEADER);
    for (int i = 0; i < n; i++)
        write_record(f, &recs[i]);
    bool ok = fchmod(fd, 0644) == 0; /* mkstemp makes 0600; others may read it */
    ok = !ferror(f) && ok;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return TL_ERR_IO;
    }
    return TL_OK;
}

static void merge(parsed *p, const tl_tune_record *rec, bool *oom)
{
    for (int i = 0; i < p->n; i++)
        if (same_key(&p->recs[i], rec)) {
            p->recs[i] = *rec;
            return;
        }
    *oom = !push(&p->recs, &p->n, &p->cap, rec);
}

tl_status tli_tune_file_put(const char *dir, const tl_tune_record *rec, tl_log_fn log, void *log_user)
{
    int lock = lock_db(dir);
    if (lock < 0)
        return TL_ERR_IO;
    parsed p;
    tl_status st = read_parsed(dir, &p);
    bool oom = false;
    if (st == TL_OK && (p.foreign || p.bad_lines))
        warn_damage(dir, &p, log, log_user);
    if (st == TL_OK && rec)
        merge(&p, rec, &oom);
    if (st == TL_OK)
        st = oom ? TL_ERR_OUT_OF_MEMORY : write_file(dir, p.recs, p.n);
    unlock_db(lock);
    free(p.recs);
    return st;
}

tl_status tli_tune_file_read(const char *dir, tl_log_fn log, void *log_user, tl_tune_record **out, int *n)
{
    *out = NULL;
    *n = 0;
    parsed p;
    tl_status st = read_parsed(dir, &p);
    if (st == TL_OK && (p.foreign || p.bad_lines)) {
        free(p.recs);
        /* rebuilt under the lock, then read again: another process may
         * have written in between */
        if ((st = tli_tune_file_put(dir, NULL, log, log_user)) == TL_OK)
            st = read_parsed(dir, &p);
    }
    if (st != TL_OK) {
        free(p.recs);
        return st;
    }
    *out = p.recs;
    *n = p.n;
    return TL_OK;
}

tl_status tli_tune_file_clear(const char *dir)
{
    int lock = lock_db(dir);
    if (lock < 0)
        return TL_ERR_IO;
    char path[PATH_MAX_LEN];
    db_path(dir, DB_NAME, path);
    tl_status st = unlink(path) == 0 || errno == ENOENT ? TL_OK : TL_ERR_IO;
    unlock_db(lock);
    return st;
}

/* ------------------------------------------------------------------------ */
/* The context's view                                                        */
/* ------------------------------------------------------------------------ */

void tli_tune_db_free(tli_tune_db *db)
{
    if (db)
        free(db->recs);
    free(db);
}

/* The context's database, made on first use; NULL on OOM. */
static tli_tune_db *db_of(tl_ctx *ctx)
{
    if (!ctx->tunedb && (ctx->tunedb = calloc(1, sizeof *ctx->tunedb))) {
        const char *dir = tli_cache_dir(ctx->cache);
        if (*dir)
            db_path(dir, DB_NAME, ctx->tunedb->path);
    }
    return ctx->tunedb;
}

static const char *db_dir(tl_ctx *ctx)
{
    return tli_cache_dir(ctx->cache);
}

static void load(tl_ctx *ctx, tli_tune_db *db)
{
    if (db->loaded)
        return;
    db->loaded = true;
    if (!*db->path)
        return;
    tl_tune_record *recs;
    int n;
    if (tli_tune_file_read(db_dir(ctx), ctx->log, ctx->log_user, &recs, &n) != TL_OK) {
        tli_log(ctx, TL_LOG_WARN, "tuning database %s cannot be read; the ops use their heuristics", db->path);
        return;
    }
    db->recs = recs;
    db->n = db->cap = n;
}

/* The GPU as a record names it. */
static void gpu_name(tl_ctx *ctx, char *out, size_t len)
{
    clean(out, len, ctx->info.name);
}

void tli_tune_record_init(tl_ctx *ctx, const tli_tune_key *key, tl_tune_record *out)
{
    memset(out, 0, sizeof *out);
    tli_fmt(out->op, sizeof out->op, "%s", key->op);
    tli_fmt(out->dtypes, sizeof out->dtypes, "%s", key->dtypes);
    tli_fmt(out->layout, sizeof out->layout, "%s", key->layout);
    tli_fmt(out->shape_class, sizeof out->shape_class, "%s", key->shape_class);
    gpu_name(ctx, out->gpu, sizeof out->gpu);
    tli_fmt(out->version, sizeof out->version, "%s", tl_version());
}

static bool find_locked(tl_ctx *ctx, const tli_tune_key *key, tl_tune_record *out)
{
    if (!ctx->info.name[0])
        return false;
    tli_tune_db *db = db_of(ctx);
    if (!db)
        return false;
    load(ctx, db);
    tl_tune_record want;
    tli_tune_record_init(ctx, key, &want);
    for (int i = db->n - 1; i >= 0; i--)
        if (same_key(&db->recs[i], &want)) {
            *out = db->recs[i];
            return true;
        }
    return false;
}

static void forget_locked(tl_ctx *ctx, const tli_tune_key *key)
{
    tli_tune_db *db = ctx->tunedb;
    if (!db)
        return;
    tl_tune_record want;
    tli_tune_record_init(ctx, key, &want);
    int kept = 0;
    for (int i = 0; i < db->n; i++)
        if (!same_key(&db->recs[i], &want))
            db->recs[kept++] = db->recs[i];
    db->n = kept;
}

static tl_status save_locked(tl_ctx *ctx, const tl_tune_record *rec)
{
    tli_tune_db *db = db_of(ctx);
    if (!db)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tuning database: out of host memory");
    load(ctx, db);
    if (*db->path) {
        tl_status st = tli_tune_file_put(db_dir(ctx), rec, ctx->log, ctx->log_user);
        if (st != TL_OK)
            return tli_fail(ctx, st, "tuning database %s cannot be written (%s)", db->path, tl_status_name(st));
    }
    parsed p = {.recs = db->recs, .n = db->n, .cap = db->cap};
    bool oom = false;
    merge(&p, rec, &oom);
    db->recs = p.recs, db->n = p.n, db->cap = p.cap;
    return oom ? tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tuning database: out of host memory") : TL_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points: several threads may share a context, so each holds the     */
/* context's ops_lock (recursive) while it reads or changes its records     */
/* ------------------------------------------------------------------------ */

bool tli_tune_db_find(tl_ctx *ctx, const tli_tune_key *key, tl_tune_record *out)
{
    pthread_mutex_lock(&ctx->ops_lock);
    bool found = find_locked(ctx, key, out);
    pthread_mutex_unlock(&ctx->ops_lock);
    return found;
}

void tli_tune_db_forget(tl_ctx *ctx, const tli_tune_key *key)
{
    pthread_mutex_lock(&ctx->ops_lock);
    forget_locked(ctx, key);
    pthread_mutex_unlock(&ctx->ops_lock);
}

void tli_tune_db_unusable(tl_ctx *ctx, const tli_tune_key *key, const char *config)
{
    tli_log(ctx, TL_LOG_WARN, "tuning database: the record for %s %s %s %s names a schedule this problem cannot "
            "use (%s); using the untuned schedule", key->op, key->dtypes, key->layout, key->shape_class, config);
    tli_tune_db_forget(ctx, key);
}

tl_status tli_tune_db_save(tl_ctx *ctx, const tl_tune_record *rec)
{
    pthread_mutex_lock(&ctx->ops_lock);
    tl_status st = save_locked(ctx, rec);
    pthread_mutex_unlock(&ctx->ops_lock);
    return st;
}

/* The path is set when the context's database is made and never changes. */
TL_API const char *tl_tune_db_path(tl_ctx *ctx)
{
    if (!ctx)
        return "";
    pthread_mutex_lock(&ctx->ops_lock);
    tli_tune_db *db = db_of(ctx);
    pthread_mutex_unlock(&ctx->ops_lock);
    return db ? db->path : "";
}

static tl_status list_locked(tl_ctx *ctx, tl_tune_record **out, int *n)
{
    tli_tune_db *db = db_of(ctx);
    if (!db)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_tune_db_list: out of host memory");
    if (*db->path) {
        tl_status st = tli_tune_file_read(db_dir(ctx), ctx->log, ctx->log_user, out, n);
        return st == TL_OK ? TL_OK : tli_fail(ctx, st, "tl_tune_db_list: %s cannot be read", db->path);
    }
    if (db->n == 0)
        return TL_OK;
    if (!(*out = malloc((size_t)db->n * sizeof **out)))
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_tune_db_list: out of host memory");
    memcpy(*out, db->recs, (size_t)db->n * sizeof **out);
    *n = db->n;
    return TL_OK;
}

static tl_status clear_locked(tl_ctx *ctx)
{
    tli_tune_db *db = db_of(ctx);
    if (!db)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_tune_db_clear: out of host memory");
    db->n = 0;
    db->loaded = true; /* nothing left to read */
    if (*db->path && tli_tune_file_clear(db_dir(ctx)) != TL_OK)
        return tli_fail(ctx, TL_ERR_IO, "tl_tune_db_clear: %s cannot be removed", db->path);
    return TL_OK;
}

TL_API tl_status tl_tune_db_list(tl_ctx *ctx, tl_tune_record **out, int *n)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!out || !n)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_tune_db_list: out or n is NULL");
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&ctx->ops_lock);
    tl_status st = list_locked(ctx, out, n);
    pthread_mutex_unlock(&ctx->ops_lock);
    return st;
}

TL_API tl_status tl_tune_db_clear(tl_ctx *ctx)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    pthread_mutex_lock(&ctx->ops_lock);
    tl_status st = clear_locked(ctx);
    pthread_mutex_unlock(&ctx->ops_lock);
    return st;
}
