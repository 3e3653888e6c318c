/*
 * cache.c - the cubin cache (see cache.h): a hash table in memory in front
 * of a directory of entry files.
 *
 * Disk layout
 *   <dir>/<h0h1>/<64 hex>.tlc            an entry
 *   <dir>/<h0h1>/<64 hex>.tmp-XXXXXX     an entry being written (mkstemp)
 * where h0h1 are the first two hex characters of the key. The 256 shard
 * directories keep any one directory small however many kernels a user
 * builds. Nothing else in <dir> is ever touched, so clearing a directory
 * that holds other files is safe.
 *
 * The directory may be shared, so whatever sits at a path the cache owns
 * is untrusted: entries are opened without following symlinks and without
 * blocking (a FIFO must not hang a compile), and only regular files are
 * read. Something in the way of one entry (a directory at its path, a
 * file in place of its shard) costs that entry its disk copy, with one
 * warning; it does not turn the disk off. Clearing removes such obstacles,
 * and removes a file named like an entry only when it starts with the
 * entry magic.
 *
 * Entry file (integers little-endian, whatever the host):
 *   offset  size  field
 *        0     8  magic "TLCUBIN1"
 *        8     4  format version (ENTRY_VERSION)
 *       12     4  meta length m (no NUL)
 *       16    32  key
 *       48     8  payload length n
 *       56    32  SHA-256 of the payload
 *       88     m  meta: a description for people (kernel, target, NVRTC)
 *     88+m     n  payload: the cubin
 * A reader checks every field and the exact file size (a truncated or
 * extended file is damaged); any mismatch makes the entry corrupt: it is
 * counted, deleted and reported as a miss, so the caller rebuilds it.
 *
 * Writers go through a temporary file in the entry's own directory and
 * rename() it into place. rename is atomic within a file system, so readers
 * in other processes see the old entry or the new one, never half of one,
 * and two processes writing the same key both succeed (the last rename wins;
 * both wrote the same bytes since the key covers all the inputs).
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "cache.h"
#include "sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRY_MAGIC "TLCUBIN1"
#define ENTRY_VERSION 1u
#define HEADER_SIZE 88
#define META_MAX 4096u        /* longer meta is cut: it is only a label */
#define DIR_MAX 1024          /* sizeof tl_cache_stats.dir             */
#define PATH_BUF (DIR_MAX + 96) /* dir + "/xx/" + 64 hex + ".tmp-XXXXXX" */
#define FIRST_BUCKETS 64

typedef struct mem_entry {
    uint8_t key[32];
    void *data;
    size_t len;
    struct mem_entry *next;
} mem_entry;

/* Every entry point takes `lock` (recursive: a log callback may ask for
 * the stats), so threads of one context share the cache safely. */
struct tli_cache {
    pthread_mutex_t lock;
    char dir[DIR_MAX];   /* "" while the disk is off                 */
    bool disk;
    bool warned_obstacle; /* said once that something is in the way  */
    tl_log_fn log;
    void *log_user;
    mem_entry **buckets; /* chained; the count is a power of two     */
    size_t nbuckets, count;
    int64_t mem_hits, disk_hits, misses, stores, corrupt;
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

/* strerror_r comes in two flavours: glibc's GNU one (under _GNU_SOURCE)
 * returns the text; the POSIX one fills buf. strerror itself is not
 * guaranteed thread-safe, and the library may share a process with
 * threads. */
static const char *err_text(int err, char *buf, size_t n)
{
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(err, buf, n);
#else
    return strerror_r(err, buf, n) == 0 ? buf : "unknown error";
#endif
}

/* Turns the disk off and says why, once: a cache that cannot write is a
 * slower cache, not a failure, but the user should know. */
static void fall_back(tli_cache *c, const char *dir, const char *why, int err)
{
    char ebuf[128], msg[DIR_MAX + 256];
    if (err)
        tli_fmt(msg, sizeof msg,
                "tilec cache: directory '%s': %s (%s); caching in memory only", dir, why,
                err_text(err, ebuf, sizeof ebuf));
    else
        tli_fmt(msg, sizeof msg, "tilec cache: directory '%s': %s; caching in memory only",
                dir, why);
    c->disk = false;
    c->dir[0] = '\0';
    if (c->log)
        c->log(c->log_user, TL_LOG_WARN, msg);
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* write() until done: it may write less than asked (signals, pipes, quotas
 * reached part-way). Returns 0 or an errno. */
static int write_full(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* pread() until done or end of file. Returns the bytes read, -1 on error. */
static ssize_t read_full(int fd, void *buf, size_t n, off_t off)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, p + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* <dir>/<h0h1> and, with suffix, <dir>/<h0h1>/<hex><suffix>. */
static void shard_path(const tli_cache *c, const uint8_t key[32], char *out)
{
    char hex[65];
    tli_hex(key, 32, hex);
    tli_fmt(out, PATH_BUF, "%s/%.2s", c->dir, hex);
}

static void entry_path(const tli_cache *c, const uint8_t key[32], const char *suffix, char *out)
{
    char hex[65];
    tli_hex(key, 32, hex);
    tli_fmt(out, PATH_BUF, "%s/%.2s/%s%s", c->dir, hex, hex, suffix);
}

/* ------------------------------------------------------------------------ */
/* Memory table                                                              */
/* ------------------------------------------------------------------------ */

/* Keys are SHA-256 digests, already uniform: their first bytes index. */
static size_t bucket_of(const uint8_t key[32], size_t nbuckets)
{
    return (size_t)get_le(key, 8) & (nbuckets - 1);
}

static mem_entry *mem_find(const tli_cache *c, const uint8_t key[32])
{
    for (mem_entry *e = c->buckets[bucket_of(key, c->nbuckets)]; e; e = e->next)
        if (memcmp(e->key, key, 32) == 0)
            return e;
    return NULL;
}

/* Doubles the table to keep chains short. Failing to grow is harmless (the
 * chains just get longer), so it reports nothing. */
static void mem_grow(tli_cache *c)
{
    size_t n = c->nbuckets * 2;
    mem_entry **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (mem_entry *e = c->buckets[i], *next; e; e = next) {
            next = e->next;
            size_t j = bucket_of(e->key, n);
            e->next = b[j];
            b[j] = e;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->nbuckets = n;
}

static void *copy_bytes(const void *data, size_t len)
{
    void *d = malloc(len ? len : 1); /* malloc(0) may return NULL */
    if (d && len)
        memcpy(d, data, len);
    return d;
}

/* Stores a copy of data under key, replacing an older copy. */
static bool mem_store(tli_cache *c, const uint8_t key[32], const void *data, size_t len)
{
    void *copy = copy_bytes(data, len);
    if (!copy)
        return false;
    mem_entry *e = mem_find(c, key);
    if (e) {
        free(e->data);
    } else {
        if (!(e = malloc(sizeof *e))) {
            free(copy);
            return false;
        }
        memcpy(e->key, key, 32);
        size_t b = bucket_of(key, c->nbuckets);
        e->next = c->buckets[b];
        c->buckets[b] = e;
        if (++c->count > c->nbuckets)
            mem_grow(c);
    }
    e->data = copy;
    e->len = len;
    return true;
}

static void mem_clear(tli_cache *c)
{
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (mem_entry *e = c->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e->data);
            free(e);
        }
        c->buckets[i] = NULL;
    }
    c->count = 0;
}

/* ------------------------------------------------------------------------ */
/* Opening: find, create and probe the directory                             */
/* ------------------------------------------------------------------------ */

/* The directory by the documented order into out; NULL, or why not. */
static const char *resolve_dir(const char *dir, char *out, size_t n)
{
    const char *env;
    int w;
    if (dir && *dir)
        w = snprintf(out, n, "%s", dir);
    else if ((env = getenv("TILEC_CACHE_DIR")) && *env)
        w = snprintf(out, n, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') /* XDG: relative = unset */
        w = snprintf(out, n, "%s/tilec", env);
    else if ((env = getenv("HOME")) && *env)
        w = snprintf(out, n, "%s/.cache/tilec", env);
    else
        return "no directory: $TILEC_CACHE_DIR, $XDG_CACHE_HOME and $HOME are unset";
    if (w < 0 || (size_t)w >= n)
        return "path too long";
    for (size_t len = strlen(out); len > 1 && out[len - 1] == '/'; len--)
        out[len - 1] = '\0';
    return NULL;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p with mode 0755. An existing component is fine whatever error
 * mkdir gives for it (some systems say EACCES rather than EEXIST). Returns
 * 0 or an errno. */
static int mkdir_p(char *path)
{
    for (char *s = path + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char saved = *s;
        *s = '\0';
        int err = mkdir(path, 0755) == 0 ? 0 : errno;
        if (err && !is_dir(path)) {
            *s = saved;
            return err == EEXIST ? ENOTDIR : err;
        }
        *s = saved;
        if (saved == '\0')
            return 0;
    }
}

/* Write access cannot be judged from permission bits (root, ACLs,
 * read-only mounts): making a file is the only sure test. */
static int probe_dir(const char *dir)
{
    char path[PATH_BUF];
    tli_fmt(path, sizeof path, "%s/.tilec-probe-XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0)
        return errno;
    close(fd);
    unlink(path);
    return 0;
}

static void enable_disk(tli_cache *c, const char *dir, bool create)
{
    char path[DIR_MAX];
    const char *why = resolve_dir(dir, path, sizeof path);
    if (why) {
        fall_back(c, dir && *dir ? dir : "(default)", why, 0);
        return;
    }
    if (!create) { /* inspection: a directory that exists, as it is */
        if (is_dir(path)) {
            memcpy(c->dir, path, sizeof path);
            c->disk = true;
        }
        return;
    }
    int err = mkdir_p(path);
    if (err) {
        fall_back(c, path, "cannot be created", err);
        return;
    }
    if ((err = probe_dir(path))) {
        fall_back(c, path, "cannot be written", err);
        return;
    }
    memcpy(c->dir, path, sizeof path);
    c->disk = true;
}

static bool init_lock(pthread_mutex_t *m)
{
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) != 0)
        return false;
    bool ok = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE) == 0 && pthread_mutex_init(m, &a) == 0;
    pthread_mutexattr_destroy(&a);
    return ok;
}

tl_status tli_cache_open(const char *dir, int disk, tl_log_fn log, void *log_user,
                         tli_cache **out)
{
    if (!out)
        return TL_ERR_INVALID_ARG;
    *out = NULL;
    tli_cache *c = calloc(1, sizeof *c);
    if (!c)
        return TL_ERR_OUT_OF_MEMORY;
    c->nbuckets = FIRST_BUCKETS;
    if (!(c->buckets = calloc(c->nbuckets, sizeof *c->buckets)) || !init_lock(&c->lock)) {
        free(c->buckets);
        free(c);
        return TL_ERR_OUT_OF_MEMORY;
    }
    c->log = log;
    c->log_user = log_user;
    if (disk)
        enable_disk(c, dir, disk != TL_DISK_CACHE_IF_EXISTS);
    *out = c;
    return TL_OK;
}

void tli_cache_close(tli_cache *c)
{
    if (!c)
        return;
    mem_clear(c);
    free(c->buckets);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *tli_cache_dir(const tli_cache *c) { return c ? c->dir : ""; }

/* ------------------------------------------------------------------------ */
/* Reading an entry                                                          */
/* ------------------------------------------------------------------------ */

typedef enum { READ_OK, READ_BAD, READ_FAIL } read_result;

/* Checks the header against key and the file's real size. */
static bool header_ok(const uint8_t *h, const uint8_t key[32], off_t size, uint64_t *meta_len,
                      uint64_t *len)
{
    *meta_len = get_le(h + 12, 4);
    *len = get_le(h + 48, 8);
    uint64_t fsize = (uint64_t)size;
    /* Compared piece by piece so that no sum of lengths can overflow. */
    return memcmp(h, ENTRY_MAGIC, 8) == 0 && get_le(h + 8, 4) == ENTRY_VERSION &&
           memcmp(h + 16, key, 32) == 0 && *meta_len <= META_MAX &&
           fsize >= HEADER_SIZE + *meta_len && *len == fsize - HEADER_SIZE - *meta_len &&
           *len <= SIZE_MAX;
}

/* READ_BAD: the file is damaged. READ_FAIL: it could not be read (I/O
 * error, out of memory, not a regular file): a miss, but no reason to
 * delete anything. */
static read_result read_entry(int fd, const uint8_t key[32], void **data, size_t *len)
{
    struct stat st;
    uint8_t h[HEADER_SIZE], digest[32];
    uint64_t meta_len, n;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return READ_FAIL;
    ssize_t r = read_full(fd, h, sizeof h, 0);
    if (r < 0)
        return READ_FAIL;
    if (r < HEADER_SIZE || !header_ok(h, key, st.st_size, &meta_len, &n))
        return READ_BAD;
    void *buf = malloc(n ? (size_t)n : 1);
    if (!buf)
        return READ_FAIL;
    r = read_full(fd, buf, (size_t)n, (off_t)(HEADER_SIZE + meta_len));
    if (r < 0 || (uint64_t)r != n) {
        free(buf);
        return r < 0 ? READ_FAIL : READ_BAD;
    }
    tli_sha256(buf, (size_t)n, digest);
    if (memcmp(digest, h + 56, 32) != 0) {
        free(buf);
        return READ_BAD;
    }
    *data = buf;
    *len = (size_t)n;
    return READ_OK;
}

/* Deletes a damaged entry, unless another process has meanwhile renamed a
 * fresh one into its place (then the path names a different file). */
static void drop_corrupt(tli_cache *c, int fd, const char *path)
{
    struct stat mine, now;
    c->corrupt++;
    if (fstat(fd, &mine) == 0 && stat(path, &now) == 0 && mine.st_dev == now.st_dev &&
        mine.st_ino == now.st_ino)
        unlink(path);
}

/* Opens a regular file at path (relative to dirfd) for reading, never
 * following a symlink and never blocking: a FIFO would hold open() until a
 * writer came. -1 for anything else. */
static int open_regular(int dirfd, const char *path)
{
    struct stat st;
    if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        return -1;
    /* It may have been swapped since: read_entry checks the open file. */
    return openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
}

static bool disk_get(tli_cache *c, const uint8_t key[32], void **data, size_t *len)
{
    char path[PATH_BUF];
    entry_path(c, key, ".tlc", path);
    int fd = open_regular(AT_FDCWD, path);
    if (fd < 0)
        return false; /* ENOENT is the plain miss; other errors miss too */
    read_result r = read_entry(fd, key, data, len);
    if (r == READ_BAD)
        drop_corrupt(c, fd, path);
    close(fd);
    return r == READ_OK;
}

static int cache_get(tli_cache *c, const uint8_t key[32], void **data, size_t *len)
{
    if (!c || !key || !data || !len)
        return 0;
    *data = NULL;
    *len = 0;
    mem_entry *e = mem_find(c, key);
    if (e && (*data = copy_bytes(e->data, e->len))) {
        *len = e->len;
        c->mem_hits++;
        return 1;
    }
    if (!e && c->disk && disk_get(c, key, data, len)) {
        mem_store(c, key, *data, *len); /* best effort: memory is only faster */
        c->disk_hits++;
        return 2;
    }
    c->misses++;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing an entry                                                          */
/* ------------------------------------------------------------------------ */

static void make_header(uint8_t *h, const uint8_t key[32], const void *data, size_t len,
                        size_t meta_len)
{
    memcpy(h, ENTRY_MAGIC, 8);
    put_le(h + 8, ENTRY_VERSION, 4);
    put_le(h + 12, meta_len, 4);
    memcpy(h + 16, key, 32);
    put_le(h + 48, len, 8);
    tli_sha256(data, len, h + 56);
}

/* Writes the whole entry into fd. No fsync: it would cost milliseconds per
 * kernel, and an entry lost or torn by a crash fails its checksum and is
 * simply rebuilt. Returns 0 or an errno. */
static int write_entry(int fd, const uint8_t key[32], const void *data, size_t len,
                       const char *meta)
{
    uint8_t h[HEADER_SIZE];
    size_t meta_len = meta ? strnlen(meta, META_MAX) : 0;
    make_header(h, key, data, len, meta_len);
    int err = write_full(fd, h, sizeof h);
    if (!err && meta_len)
        err = write_full(fd, meta, meta_len);
    if (!err && len)
        err = write_full(fd, data, len);
    /* mkstemp makes 0600; entries are as readable as the 0755 directory. */
    if (!err && fchmod(fd, 0644) != 0)
        err = errno;
    return err;
}

/* How a store to disk went. */
typedef enum put_result {
    PUT_OK,       /* stored (or lost to a concurrent clear: harmless)     */
    PUT_BLOCKED,  /* something foreign is in the way of this one entry    */
    PUT_FAILED    /* the directory cannot be written: turn the disk off   */
} put_result;

/* The shard directory of key, made when missing. PUT_BLOCKED when a
 * non-directory (or a symlink, which would lead writes elsewhere) holds
 * its name. */
static put_result make_shard(const char *shard, int *err)
{
    struct stat st;
    if (mkdir(shard, 0755) == 0)
        return PUT_OK;
    *err = errno;
    if (*err != EEXIST)
        return PUT_FAILED;
    return lstat(shard, &st) == 0 && S_ISDIR(st.st_mode) ? PUT_OK : PUT_BLOCKED;
}

/* Writes the entry through a temporary file renamed into place. On
 * PUT_FAILED, *err and *what say what went wrong; on PUT_BLOCKED, *what
 * is the path in the way. */
static put_result disk_put(tli_cache *c, const uint8_t key[32], const void *data, size_t len, const char *meta,
                           int *err, char *what, size_t what_len)
{
    char shard[PATH_BUF], tmp[PATH_BUF], final[PATH_BUF];
    shard_path(c, key, shard);
    put_result r = make_shard(shard, err);
    if (r != PUT_OK) {
        tli_fmt(what, what_len, "%s", r == PUT_BLOCKED ? shard : "cannot create a subdirectory");
        return r;
    }
    entry_path(c, key, ".tmp-XXXXXX", tmp);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        *err = errno;
        tli_fmt(what, what_len, "cannot create a file");
        return PUT_FAILED;
    }
    *err = write_entry(fd, key, data, len, meta);
    if (close(fd) != 0 && !*err)
        *err = errno; /* NFS and quotas may report a failed write only here */
    entry_path(c, key, ".tlc", final);
    if (!*err && rename(tmp, final) != 0) {
        /* ENOENT: a tli_cache_clear in another process removed our
         * temporary file. Only this one store is lost; the disk works. */
        if (errno == ENOENT)
            return PUT_OK;
        *err = errno;
        /* rename replaces any non-directory; a directory stays in the way */
        r = *err == EISDIR || *err == ENOTEMPTY || *err == EEXIST ? PUT_BLOCKED : PUT_FAILED;
        tli_fmt(what, what_len, "%s", r == PUT_BLOCKED ? final : "cannot write an entry");
    } else if (*err) {
        r = PUT_FAILED;
        tli_fmt(what, what_len, "cannot write an entry");
    }
    if (r != PUT_OK)
        unlink(tmp);
    return r;
}

/* One warning per cache for entries kept from the disk by obstacles. */
static void warn_blocked(tli_cache *c, const char *path)
{
    if (c->warned_obstacle || !c->log)
        return;
    c->warned_obstacle = true;
    char msg[PATH_BUF + 256];
    tli_fmt(msg, sizeof msg,
            "tilec cache: '%s' is in the way (not a directory where a shard goes, or a directory where an "
            "entry goes); such entries stay in memory only until the cache is cleared", path);
    c->log(c->log_user, TL_LOG_WARN, msg);
}

static tl_status cache_put(tli_cache *c, const uint8_t key[32], const void *data, size_t len, const char *meta)
{
    if (!c || !key || (!data && len))
        return TL_ERR_INVALID_ARG;
    bool stored = mem_store(c, key, data, len);
    if (stored)
        c->stores++;
    if (c->disk) {
        char what[PATH_BUF], dir[DIR_MAX];
        int err = 0;
        memcpy(dir, c->dir, sizeof dir); /* fall_back clears c->dir */
        put_result r = disk_put(c, key, data, len, meta, &err, what, sizeof what);
        if (r == PUT_BLOCKED)
            warn_blocked(c, what);
        else if (r == PUT_FAILED)
            fall_back(c, dir, what, err);
    }
    return stored ? TL_OK : TL_ERR_OUT_OF_MEMORY;
}

/* ------------------------------------------------------------------------ */
/* Scanning the directory: stats and clear                                   */
/* ------------------------------------------------------------------------ */

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* Names this cache makes in shard `shard`: entries and temporary files. */
static bool is_entry_name(const char *name, const char *shard)
{
    return strlen(name) == 68 && is_hex(name, 64) && strncmp(name, shard, 2) == 0 &&
           strcmp(name + 64, ".tlc") == 0;
}

static bool is_temp_name(const char *name, const char *shard)
{
    return strlen(name) == 75 && is_hex(name, 64) && strncmp(name, shard, 2) == 0 &&
           strncmp(name + 64, ".tmp-", 5) == 0;
}

typedef struct scan_state {
    bool remove;              /* clear: unlink what we made           */
    int64_t entries, bytes;   /* stats: what is there                 */
    bool failed;              /* clear: something could not go       */
} scan_state;

#define TREE_DEPTH 16 /* how deep clear digs into a foreign directory */

/* Removes name (relative to dirfd) whatever it is; a directory with all
 * it holds, never following a symlink and at most TREE_DEPTH levels down.
 * false when something stays. */
static bool remove_any(int dirfd, const char *name, int depth)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return true;
    if ((errno != EISDIR && errno != EPERM) || depth >= TREE_DEPTH)
        return false; /* POSIX lets unlink of a directory fail with EPERM */
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return false;
    }
    bool ok = true;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            ok = remove_any(fd, de->d_name, depth + 1) && ok;
    closedir(d);
    return ok && (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT);
}

/* A regular file that begins with the entry magic (any format version):
 * files of others that merely have an entry's name stay. */
static bool has_magic(int dirfd, const char *name)
{
    uint8_t head[8];
    int fd = open_regular(dirfd, name);
    if (fd < 0)
        return false;
    ssize_t r = read_full(fd, head, sizeof head, 0);
    close(fd);
    return r == (ssize_t)sizeof head && memcmp(head, ENTRY_MAGIC, 7) == 0;
}

/* Clear: an entry of ours goes, and a temporary file (only mkstemp in our
 * shard makes such a name; a crashed writer leaves any prefix of an
 * entry); so does anything that is not a regular file at such a path (an
 * obstacle: a directory, a FIFO, a symlink). */
static void clear_name(int fd, const char *name, bool temp, scan_state *s)
{
    struct stat st;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    bool ours = !S_ISREG(st.st_mode) || temp || has_magic(fd, name);
    if (ours && !remove_any(fd, name, 0))
        s->failed = true;
}

static void scan_shard(int dfd, const char *shard, scan_state *s)
{
    int fd = openat(dfd, shard, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        s->failed = s->failed || (s->remove && errno != ENOENT);
        return;
    }
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        bool entry = is_entry_name(de->d_name, shard), temp = is_temp_name(de->d_name, shard);
        if (s->remove && (entry || temp))
            clear_name(fd, de->d_name, temp, s);
        else if (entry && fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
            s->entries++;
            s->bytes += (int64_t)st.st_size;
        }
    }
    closedir(d); /* closes fd too */
}

/* Visits the shard directories. Shards themselves are left in place even
 * when empty: removing one could race with a writer about to create a file
 * in it. Clear removes whatever else holds a shard's name (it blocks every
 * entry of that shard). */
static void scan_dir(const tli_cache *c, scan_state *s)
{
    DIR *d = opendir(c->dir);
    if (!d) {
        s->failed = s->remove && errno != ENOENT;
        return;
    }
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        if (strlen(de->d_name) != 2 || !is_hex(de->d_name, 2) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            scan_shard(dirfd(d), de->d_name, s);
        else if (s->remove && !remove_any(dirfd(d), de->d_name, 0))
            s->failed = true;
    }
    closedir(d);
}

static tl_status cache_stats(tli_cache *c, tl_cache_stats *out)
{
    if (!c || !out)
        return TL_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    tli_fmt(out->dir, sizeof out->dir, "%s", c->dir);
    out->disk_enabled = c->disk;
    if (c->disk) {
        scan_state s = {.remove = false};
        scan_dir(c, &s);
        out->disk_entries = s.entries;
        out->disk_bytes = s.bytes;
    }
    out->mem_entries = (int64_t)c->count;
    out->mem_hits = c->mem_hits;
    out->disk_hits = c->disk_hits;
    out->misses = c->misses;
    out->stores = c->stores;
    out->corrupt_rebuilt = c->corrupt;
    return TL_OK;
}

static tl_status cache_clear(tli_cache *c)
{
    if (!c)
        return TL_ERR_INVALID_ARG;
    mem_clear(c);
    if (!c->disk)
        return TL_OK;
    scan_state s = {.remove = true};
    scan_dir(c, &s);
    return s.failed ? TL_ERR_IO : TL_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points: each under the cache's lock                                */
/* ------------------------------------------------------------------------ */

int tli_cache_get(tli_cache *c, const uint8_t key[32], void **data, size_t *len)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->lock);
    int r = cache_get(c, key, data, len);
    pthread_mutex_unlock(&c->lock);
    return r;
}

tl_status tli_cache_put(tli_cache *c, const uint8_t key[32], const void *data, size_t len, const char *meta)
{
    if (!c)
        return TL_ERR_INVALID_ARG;
    pthread_mutex_lock(&c->lock);
    tl_status st = cache_put(c, key, data, len, meta);
    pthread_mutex_unlock(&c->lock);
    return st;
}

tl_status tli_cache_stats(tli_cache *c, tl_cache_stats *out)
{
    if (!c)
        return TL_ERR_INVALID_ARG;
    pthread_mutex_lock(&c->lock);
    tl_status st = cache_stats(c, out);
    pthread_mutex_unlock(&c->lock);
    return st;
}

tl_status tli_cache_clear(tli_cache *c)
{
    if (!c)
        return TL_ERR_INVALID_ARG;
    pthread_mutex_lock(&c->lock);
    tl_status st = cache_clear(c);
    pthread_mutex_unlock(&c->lock);
    return st;
}
