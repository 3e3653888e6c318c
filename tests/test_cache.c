/*
 * test_cache.c - SHA-256 against the FIPS 180 test vectors, and the cubin
 * cache: memory and disk hits, damaged entries, unwritable directories,
 * hostile directory contents (FIFOs, symlinks, directories and foreign
 * files at the cache's paths), several processes on one directory, clear,
 * and how the directory is found.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cache.h"
#include "sha256.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct log_capture {
    int warns, others;
    char last[2048];
} log_capture;

static void capture_log(void *user, tl_log_level level, const char *msg)
{
    log_capture *lc = user;
    if (level == TL_LOG_WARN)
        lc->warns++;
    else
        lc->others++;
    snprintf(lc->last, sizeof lc->last, "%s", msg);
}

static void make_tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/tilec-cache-test-XXXXXX");
    assert_non_null(mkdtemp(buf));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_rf(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void key_of(int i, uint8_t key[32])
{
    char text[32];
    snprintf(text, sizeof text, "key-%d", i);
    tli_sha256(text, strlen(text), key);
}

/* Payloads of many sizes, 0 included, whose bytes depend on the key. */
static size_t size_of(int i) { return i == 0 ? 0 : (size_t)(i * 7919) % 300000 + 1; }

static uint8_t *payload_of(int i, size_t *len)
{
    *len = size_of(i);
    uint8_t *p = malloc(*len + 1);
    for (size_t j = 0; j < *len; j++)
        p[j] = (uint8_t)(i * 31 + j * 7 + (j >> 8));
    return p;
}

static bool payload_ok(int i, const void *data, size_t len)
{
    size_t want;
    uint8_t *p = payload_of(i, &want);
    bool ok = len == want && (len == 0 || memcmp(p, data, len) == 0);
    free(p);
    return ok;
}

static void entry_file(const char *dir, const uint8_t key[32], char *out, size_t n)
{
    char hex[65];
    tli_hex(key, 32, hex);
    snprintf(out, n, "%s/%.2s/%s.tlc", dir, hex, hex);
}

static tli_cache *open_ok(const char *dir, int disk, log_capture *lc)
{
    tli_cache *c = NULL;
    assert_int_equal(tli_cache_open(dir, disk, lc ? capture_log : NULL, lc, &c), TL_OK);
    assert_non_null(c);
    return c;
}

static void put_ok(tli_cache *c, int i)
{
    uint8_t key[32];
    size_t len;
    uint8_t *p = payload_of(i, &len);
    key_of(i, key);
    assert_int_equal(tli_cache_put(c, key, p, len, "kernel=test target=sm_90a"), TL_OK);
    free(p);
}

/* Expects get(i) to answer `want` (0, 1, 2) with the right payload. */
static void get_expect(tli_cache *c, int i, int want)
{
    uint8_t key[32];
    void *data = NULL;
    size_t len = 0;
    key_of(i, key);
    assert_int_equal(tli_cache_get(c, key, &data, &len), want);
    if (want)
        assert_true(payload_ok(i, data, len));
    else
        assert_null(data);
    free(data);
}

static tl_cache_stats stats_of(tli_cache *c)
{
    tl_cache_stats s;
    assert_int_equal(tli_cache_stats(c, &s), TL_OK);
    return s;
}

/* Counts files under dir whose name contains `part`. */
static int count_named(const char *dir, const char *part)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char sub[2048];
        snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            n += count_named(sub, part);
        else if (strstr(de->d_name, part))
            n++;
    }
    closedir(d);
    return n;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ------------------------------------------------------------------------ */
/* SHA-256                                                                   */
/* ------------------------------------------------------------------------ */

static void expect_digest(const char *msg, const char *want)
{
    uint8_t d[32];
    char hex[65];
    tli_sha256(msg, strlen(msg), d);
    tli_hex(d, 32, hex);
    assert_string_equal(hex, want);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    expect_digest("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_digest("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect_digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    expect_digest("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                  "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

    /* One million 'a', fed in uneven pieces to cross block boundaries. */
    static const size_t pieces[] = {1, 63, 64, 65, 1000, 7, 4096};
    char a[4096];
    memset(a, 'a', sizeof a);
    tli_sha256 s;
    tli_sha256_init(&s);
    size_t done = 0;
    for (int i = 0; done < 1000000; i++) {
        size_t n = pieces[i % 7];
        if (n > 1000000 - done)
            n = 1000000 - done;
        tli_sha256_update(&s, a, n);
        done += n;
    }
    uint8_t d[32];
    char hex[65];
    tli_sha256_final(&s, d);
    tli_hex(d, 32, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Every split of every short message gives the one-shot digest (the
 * padding cases at 55, 56 and 64 bytes included). */
static void test_sha256_incremental(void **state)
{
    (void)state;
    uint8_t msg[200], whole[32], parts[32];
    for (int i = 0; i < 200; i++)
        msg[i] = (uint8_t)(i * 13 + 5);
    for (size_t n = 0; n <= 200; n++) {
        tli_sha256(msg, n, whole);
        for (size_t cut = 0; cut <= n; cut += 1 + cut / 8) {
            tli_sha256 s;
            tli_sha256_init(&s);
            tli_sha256_update(&s, msg, cut);
            tli_sha256_update(&s, NULL, 0);
            tli_sha256_update(&s, msg + cut, n - cut);
            tli_sha256_final(&s, parts);
            assert_memory_equal(whole, parts, 32);
        }
    }
    char hex[7];
    tli_hex((const uint8_t *)"\x00\xab\xff", 3, hex);
    assert_string_equal(hex, "00abff");
}

/* ------------------------------------------------------------------------ */
/* Cache                                                                     */
/* ------------------------------------------------------------------------ */

static void test_invalid_args(void **state)
{
    (void)state;
    uint8_t key[32] = {0};
    void *data = NULL;
    size_t len = 0;
    tl_cache_stats st;
    assert_int_equal(tli_cache_open(NULL, 0, NULL, NULL, NULL), TL_ERR_INVALID_ARG);
    tli_cache *c = open_ok(NULL, 0, NULL);
    assert_int_equal(tli_cache_put(NULL, key, "x", 1, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tli_cache_put(c, NULL, "x", 1, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tli_cache_put(c, key, NULL, 1, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tli_cache_get(NULL, key, &data, &len), 0);
    assert_int_equal(tli_cache_get(c, NULL, &data, &len), 0);
    assert_int_equal(tli_cache_get(c, key, NULL, &len), 0);
    assert_int_equal(tli_cache_stats(NULL, &st), TL_ERR_INVALID_ARG);
    assert_int_equal(tli_cache_stats(c, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tli_cache_clear(NULL), TL_ERR_INVALID_ARG);
    assert_string_equal(tli_cache_dir(NULL), "");
    tli_cache_close(c);
    tli_cache_close(NULL);
}

static void test_memory_only(void **state)
{
    (void)state;
    log_capture lc = {0};
    tli_cache *c = open_ok(NULL, 0, &lc);
    assert_string_equal(tli_cache_dir(c), "");
    get_expect(c, 3, 0);
    put_ok(c, 3);
    get_expect(c, 3, 1);
    put_ok(c, 0); /* an empty payload is a valid entry */
    get_expect(c, 0, 1);
    put_ok(c, 3); /* putting again replaces, not duplicates */
    for (int i = 10; i < 400; i++) /* enough to make the table grow */
        put_ok(c, i);
    for (int i = 10; i < 400; i += 37)
        get_expect(c, i, 1);
    tl_cache_stats s = stats_of(c);
    assert_string_equal(s.dir, "");
    assert_int_equal(s.disk_enabled, 0);
    assert_int_equal(s.disk_entries, 0);
    assert_int_equal(s.mem_entries, 2 + 390);
    assert_int_equal(s.mem_hits, 2 + 11);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.stores, 3 + 390);
    assert_int_equal(lc.warns + lc.others, 0);
    tli_cache_close(c);
}

static void test_disk_hit(void **state)
{
    (void)state;
    char dir[256], path[1024];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    tli_cache *a = open_ok(dir, 1, &lc);
    assert_string_equal(tli_cache_dir(a), dir);
    get_expect(a, 7, 0);
    put_ok(a, 7);
    get_expect(a, 7, 1);
    tl_cache_stats s = stats_of(a);
    assert_int_equal(s.disk_enabled, 1);
    assert_string_equal(s.dir, dir);
    assert_int_equal(s.disk_entries, 1);
    assert_int_equal(s.disk_bytes, 88 + strlen("kernel=test target=sm_90a") + size_of(7));
    uint8_t key[32];
    key_of(7, key);
    entry_file(dir, key, path, sizeof path);
    assert_true(exists(path));
    tli_cache_close(a);

    tli_cache *b = open_ok(dir, 1, &lc);
    get_expect(b, 7, 2);
    get_expect(b, 7, 1); /* the disk hit went into memory too */
    s = stats_of(b);
    assert_int_equal(s.disk_hits, 1);
    assert_int_equal(s.mem_hits, 1);
    assert_int_equal(s.misses, 0);
    assert_int_equal(s.mem_entries, 1);
    assert_int_equal(lc.warns, 0);
    tli_cache_close(b);
    assert_int_equal(count_named(dir, ".tmp-") + count_named(dir, "probe"), 0);
    rm_rf(dir);
}

typedef enum { FLIP_PAYLOAD, TRUNCATE, APPEND, BAD_MAGIC, BAD_VERSION, WRONG_KEY } damage;

static void do_damage(const char *dir, damage how, int i)
{
    char path[1024];
    uint8_t key[32];
    key_of(i, key);
    entry_file(dir, key, path, sizeof path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    off_t at = how == FLIP_PAYLOAD ? st.st_size - 1 : how == BAD_MAGIC ? 0 : 8;
    switch (how) {
    case FLIP_PAYLOAD:
    case BAD_MAGIC:
    case BAD_VERSION:
        assert_int_equal(pread(fd, &b, 1, at), 1);
        b ^= 0x5a;
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
        break;
    case TRUNCATE:
        assert_int_equal(ftruncate(fd, st.st_size - 7), 0);
        break;
    case APPEND:
        assert_int_equal(pwrite(fd, "junk", 4, st.st_size), 4);
        break;
    case WRONG_KEY: { /* a valid entry of another key under this name */
        char other[1024];
        uint8_t okey[32];
        key_of(i + 1, okey);
        entry_file(dir, okey, other, sizeof other);
        assert_int_equal(rename(other, path), 0);
        break;
    }
    }
    close(fd);
}

static void check_damage(damage how)
{
    char dir[256], path[1024];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    tli_cache *a = open_ok(dir, 1, &lc);
    put_ok(a, 5);
    put_ok(a, 6);
    tli_cache_close(a);
    do_damage(dir, how, 5);

    tli_cache *b = open_ok(dir, 1, &lc);
    get_expect(b, 5, 0);
    tl_cache_stats s = stats_of(b);
    assert_int_equal(s.corrupt_rebuilt, 1);
    assert_int_equal(s.misses, 1);
    uint8_t key[32];
    key_of(5, key);
    entry_file(dir, key, path, sizeof path);
    assert_false(exists(path)); /* the damaged file is gone */
    put_ok(b, 5);               /* the caller rebuilds and stores again */
    tli_cache_close(b);

    tli_cache *c = open_ok(dir, 1, &lc);
    get_expect(c, 5, 2);
    assert_int_equal(stats_of(c).corrupt_rebuilt, 0);
    tli_cache_close(c);
    assert_int_equal(lc.warns, 0);
    rm_rf(dir);
}

static void test_corrupt_payload(void **state) { (void)state; check_damage(FLIP_PAYLOAD); }
static void test_truncated(void **state) { (void)state; check_damage(TRUNCATE); }
static void test_extended(void **state) { (void)state; check_damage(APPEND); }
static void test_bad_magic(void **state) { (void)state; check_damage(BAD_MAGIC); }
static void test_bad_version(void **state) { (void)state; check_damage(BAD_VERSION); }
static void test_wrong_key(void **state) { (void)state; check_damage(WRONG_KEY); }

/* Memory keeps working after the fallback, and the warning comes once. */
static void check_memory_fallback(tli_cache *c, log_capture *lc, const char *dir, int before)
{
    assert_int_equal(lc->warns, 1);
    assert_non_null(strstr(lc->last, dir));
    assert_string_equal(tli_cache_dir(c), "");
    for (int i = 0; i < 5; i++)
        put_ok(c, i);
    for (int i = 0; i < 5; i++)
        get_expect(c, i, 1);
    get_expect(c, 99, 0);
    tl_cache_stats s = stats_of(c);
    assert_int_equal(s.disk_enabled, 0);
    assert_string_equal(s.dir, "");
    assert_int_equal(s.mem_entries, before + 5);
    assert_int_equal(s.mem_hits, 5);
    assert_int_equal(lc->warns, 1);
}

static void test_dir_under_a_file(void **state)
{
    (void)state;
    char dir[256], file[512], cdir[600];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/file", dir);
    snprintf(cdir, sizeof cdir, "%s/cache", file);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    tli_cache *c = open_ok(cdir, 1, &lc);
    check_memory_fallback(c, &lc, cdir, 0);
    assert_int_equal(tli_cache_clear(c), TL_OK);
    tli_cache_close(c);
    rm_rf(dir);
}

static void test_read_only_dir(void **state)
{
    (void)state;
    if (geteuid() == 0) { /* root writes through mode 0555; see test_dir_under_a_file */
        print_message("  skip: root can write to a read-only directory\n");
        skip();
    }
    char dir[256], ro[512];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    snprintf(ro, sizeof ro, "%s/ro", dir);
    assert_int_equal(mkdir(ro, 0555), 0);
    tli_cache *c = open_ok(ro, 1, &lc);
    check_memory_fallback(c, &lc, ro, 0);
    tli_cache_close(c);
    rm_rf(dir);
}

/* A directory that disappears after open: the next write falls back. */
static void test_dir_removed_later(void **state)
{
    (void)state;
    char dir[256], sub[512];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    snprintf(sub, sizeof sub, "%s/a/b/c/", dir); /* made with mkdir -p */
    tli_cache *c = open_ok(sub, 1, &lc);
    sub[strlen(sub) - 1] = '\0'; /* the cache drops the trailing slash */
    assert_string_equal(tli_cache_dir(c), sub);
    assert_int_equal(lc.warns, 0);
    put_ok(c, 40);
    rm_rf(dir);
    put_ok(c, 41); /* the write fails: memory only from now on */
    check_memory_fallback(c, &lc, sub, 2);
    get_expect(c, 40, 1); /* what was stored before is still in memory */
    tli_cache_close(c);
}

static void test_clear(void **state)
{
    (void)state;
    char dir[256], path[1024];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    tli_cache *c = open_ok(dir, 1, &lc);
    for (int i = 0; i < 20; i++)
        put_ok(c, i);
    assert_int_equal(stats_of(c).disk_entries, 20);

    /* Files the cache did not make survive; a stale temp file does not. */
    uint8_t key[32];
    char hex[65];
    key_of(0, key);
    tli_hex(key, 32, hex);
    const char *names[] = {"README", "%.2s/notes.txt", "%.2s/%s.tmp-abcdef"};
    for (int i = 0; i < 3; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, names[i], hex, hex);
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("x", f);
        fclose(f);
    }
    assert_int_equal(tli_cache_clear(c), TL_OK);
    tl_cache_stats s = stats_of(c);
    assert_int_equal(s.disk_entries, 0);
    assert_int_equal(s.disk_bytes, 0);
    assert_int_equal(s.mem_entries, 0);
    assert_int_equal(count_named(dir, ".tlc"), 0);
    assert_int_equal(count_named(dir, ".tmp-"), 0);
    assert_int_equal(count_named(dir, "README"), 1);
    assert_int_equal(count_named(dir, "notes.txt"), 1);
    get_expect(c, 3, 0);
    put_ok(c, 3); /* the cache works after a clear */
    get_expect(c, 3, 1);
    assert_int_equal(stats_of(c).disk_entries, 1);
    assert_int_equal(lc.warns, 0);
    tli_cache_close(c);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* Hostile directory contents: the directory may be shared, so anything can  */
/* sit at a path the cache owns                                              */
/* ------------------------------------------------------------------------ */

/* A test that would hang (open() of a FIFO) is killed, which fails it. */
#define HANG_GUARD_SECONDS 20

static void shard_dir(const char *dir, const uint8_t key[32], char *out, size_t n)
{
    char hex[65];
    tli_hex(key, 32, hex);
    snprintf(out, n, "%s/%.2s", dir, hex);
}

static tli_cache *open_with_shard(const char *dir, int i, log_capture *lc, char *entry, size_t n)
{
    uint8_t key[32];
    char shard[1024];
    key_of(i, key);
    shard_dir(dir, key, shard, sizeof shard);
    assert_int_equal(mkdir(shard, 0755), 0);
    entry_file(dir, key, entry, n);
    return open_ok(dir, 1, lc);
}

/* Another cache on the same directory finds i on disk. */
static void expect_on_disk(const char *dir, int i)
{
    tli_cache *other = open_ok(dir, 1, NULL);
    get_expect(other, i, 2);
    tli_cache_close(other);
}

/* A FIFO at an entry's path blocked tl_compile forever in open(). */
static void test_fifo_at_entry(void **state)
{
    (void)state;
    char dir[256], entry[1024], fifo[1024], link[1024];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    alarm(HANG_GUARD_SECONDS);
    tli_cache *c = open_with_shard(dir, 5, &lc, entry, sizeof entry);
    assert_int_equal(mkfifo(entry, 0644), 0);
    get_expect(c, 5, 0);
    put_ok(c, 5); /* the entry replaces the FIFO */
    expect_on_disk(dir, 5);
    /* a symlink to a FIFO elsewhere: the same */
    uint8_t key[32];
    key_of(6, key);
    entry_file(dir, key, link, sizeof link);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    char shard[1024];
    shard_dir(dir, key, shard, sizeof shard);
    mkdir(shard, 0755);
    assert_int_equal(symlink(fifo, link), 0);
    get_expect(c, 6, 0);
    assert_int_equal(tli_cache_clear(c), TL_OK);
    assert_true(exists(fifo)); /* the link went, not what it points to */
    assert_int_equal(lc.warns, 0);
    alarm(0);
    tli_cache_close(c);
    rm_rf(dir);
}

/* A directory at an entry's path turned the disk off for every process;
 * now it costs that entry its disk copy, once warned, and clear removes it. */
static void test_dir_at_entry(void **state)
{
    (void)state;
    char dir[256], entry[1024], inside[1100];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    tli_cache *c = open_with_shard(dir, 7, &lc, entry, sizeof entry);
    assert_int_equal(mkdir(entry, 0755), 0);
    snprintf(inside, sizeof inside, "%s/x", entry);
    assert_int_equal(mkdir(inside, 0755), 0);
    get_expect(c, 7, 0);
    put_ok(c, 7);
    put_ok(c, 7);
    get_expect(c, 7, 1);
    assert_int_equal(lc.warns, 1);
    assert_non_null(strstr(lc.last, entry));
    assert_string_equal(tli_cache_dir(c), dir); /* the disk stays on */
    put_ok(c, 8);
    expect_on_disk(dir, 8);
    assert_int_equal(tli_cache_clear(c), TL_OK);
    assert_false(exists(entry));
    put_ok(c, 7);
    expect_on_disk(dir, 7);
    tli_cache_close(c);
    rm_rf(dir);
}

/* A file where a shard directory goes. */
static void test_file_at_shard(void **state)
{
    (void)state;
    char dir[256], shard[1024];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    uint8_t key[32];
    key_of(9, key);
    shard_dir(dir, key, shard, sizeof shard);
    FILE *f = fopen(shard, "w");
    assert_non_null(f);
    fclose(f);
    tli_cache *c = open_ok(dir, 1, &lc);
    put_ok(c, 9);
    get_expect(c, 9, 1);
    assert_int_equal(lc.warns, 1);
    assert_non_null(strstr(lc.last, shard));
    assert_string_equal(tli_cache_dir(c), dir);
    put_ok(c, 10);
    expect_on_disk(dir, 10);
    assert_int_equal(tli_cache_clear(c), TL_OK);
    assert_false(exists(shard));
    put_ok(c, 9);
    expect_on_disk(dir, 9);
    tli_cache_close(c);
    rm_rf(dir);
}

/* clear removed any file named like an entry; now only those that start
 * as entries do. */
static void test_clear_checks_headers(void **state)
{
    (void)state;
    char dir[256], foreign[1024], outside[512];
    make_tmpdir(dir, sizeof dir);
    tli_cache *c = open_ok(dir, 1, NULL);
    put_ok(c, 11);
    uint8_t key[32];
    key_of(12, key);
    char shard[1024];
    shard_dir(dir, key, shard, sizeof shard);
    mkdir(shard, 0755);
    entry_file(dir, key, foreign, sizeof foreign);
    FILE *f = fopen(foreign, "w");
    assert_non_null(f);
    fputs("somebody else's data, not a cubin", f);
    fclose(f);
    /* a symlink named like an entry: removed, its target kept */
    snprintf(outside, sizeof outside, "%s/outside.tlc", dir);
    f = fopen(outside, "w");
    assert_non_null(f);
    fputs("TLCUBIN1 but outside the shards", f);
    fclose(f);
    char link[1024];
    key_of(13, key);
    shard_dir(dir, key, shard, sizeof shard);
    mkdir(shard, 0755);
    entry_file(dir, key, link, sizeof link);
    assert_int_equal(symlink(outside, link), 0);
    assert_int_equal(tli_cache_clear(c), TL_OK);
    assert_true(exists(foreign));
    assert_true(exists(outside));
    struct stat st;
    assert_int_not_equal(lstat(link, &st), 0);
    assert_int_equal(stats_of(c).disk_entries, 1); /* the foreign file counts; it is named like one */
    tli_cache_close(c);
    rm_rf(dir);
}

/* TL_DISK_CACHE_IF_EXISTS (tilec cache stats) never creates the directory. */
static void test_if_exists_mode(void **state)
{
    (void)state;
    char dir[256], missing[512];
    log_capture lc = {0};
    make_tmpdir(dir, sizeof dir);
    snprintf(missing, sizeof missing, "%s/not/there", dir);
    tli_cache *c = open_ok(missing, TL_DISK_CACHE_IF_EXISTS, &lc);
    assert_false(exists(missing));
    assert_string_equal(tli_cache_dir(c), "");
    assert_int_equal(stats_of(c).disk_enabled, 0);
    assert_int_equal(tli_cache_clear(c), TL_OK);
    assert_false(exists(missing));
    assert_int_equal(lc.warns, 0);
    tli_cache_close(c);
    c = open_ok(dir, 1, NULL);
    put_ok(c, 14);
    tli_cache_close(c);
    c = open_ok(dir, TL_DISK_CACHE_IF_EXISTS, &lc);
    assert_string_equal(tli_cache_dir(c), dir);
    assert_int_equal(stats_of(c).disk_entries, 1);
    tli_cache_close(c);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* Several processes on one directory                                        */
/* ------------------------------------------------------------------------ */

#define NKEYS 50
#define NCHILD 4
#define ROUNDS 3

static void child_warn(void *user, tl_log_level level, const char *msg)
{
    (void)msg;
    if (level == TL_LOG_WARN)
        ++*(int *)user;
}

/* A child cannot use cmocka's asserts (they jump into the parent's copy of
 * the runner): it returns its verdict as the exit status. Each round uses a
 * fresh cache so that gets go to the disk while the others write. */
static int child_main(int me)
{
    int warns = 0;
    for (int round = 0; round < ROUNDS; round++) {
        tli_cache *c = NULL;
        if (tli_cache_open(getenv("TLT_DIR"), 1, child_warn, &warns, &c) != TL_OK)
            return 10;
        for (int n = 0; n < NKEYS; n++) {
            int i = (n + me * 13 + round * 7) % NKEYS;
            uint8_t key[32];
            void *data = NULL;
            size_t len = 0, plen;
            key_of(i, key);
            int r = tli_cache_get(c, key, &data, &len);
            if (r == 1 || (r == 2 && !payload_ok(i, data, len)))
                return 11;
            free(data);
            uint8_t *p = payload_of(i, &plen);
            tl_status st = tli_cache_put(c, key, p, plen, "child");
            free(p);
            if (st != TL_OK)
                return 12;
        }
        tl_cache_stats s;
        tli_cache_stats(c, &s);
        tli_cache_close(c);
        if (s.corrupt_rebuilt != 0 || !s.disk_enabled)
            return 13;
    }
    return warns ? 14 : 0;
}

static void test_processes(void **state)
{
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    setenv("TLT_DIR", dir, 1);
    fflush(NULL); /* children must not flush the parent's buffers again */
    pid_t pids[NCHILD];
    for (int k = 0; k < NCHILD; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0)
            _exit(child_main(k));
    }
    for (int k = 0; k < NCHILD; k++) {
        int status = 0;
        assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    unsetenv("TLT_DIR");

    log_capture lc = {0};
    tli_cache *c = open_ok(dir, 1, &lc);
    for (int i = 0; i < NKEYS; i++)
        get_expect(c, i, 2);
    tl_cache_stats s = stats_of(c);
    assert_int_equal(s.disk_entries, NKEYS);
    assert_int_equal(s.corrupt_rebuilt, 0);
    assert_int_equal(count_named(dir, ".tmp-"), 0);
    assert_int_equal(count_named(dir, "probe"), 0);
    assert_int_equal(lc.warns, 0);
    tli_cache_close(c);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* Finding the directory                                                     */
/* ------------------------------------------------------------------------ */

static void expect_dir(const char *want)
{
    log_capture lc = {0};
    tli_cache *c = open_ok(NULL, 1, &lc);
    assert_string_equal(tli_cache_dir(c), want);
    assert_int_equal(lc.warns, 0);
    tli_cache_close(c);
}

static void save_env(const char *name, char **saved)
{
    const char *v = getenv(name);
    *saved = v ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

static void test_env_resolution(void **state)
{
    (void)state;
    char dir[256], want[512], tdir[512];
    char *old_tilec, *old_xdg, *old_home;
    save_env("TILEC_CACHE_DIR", &old_tilec);
    save_env("XDG_CACHE_HOME", &old_xdg);
    save_env("HOME", &old_home);
    make_tmpdir(dir, sizeof dir);
    snprintf(tdir, sizeof tdir, "%s/env", dir);
    setenv("TILEC_CACHE_DIR", tdir, 1);
    setenv("XDG_CACHE_HOME", dir, 1);
    setenv("HOME", dir, 1);
    expect_dir(tdir);
    assert_true(exists(tdir));

    unsetenv("TILEC_CACHE_DIR");
    snprintf(want, sizeof want, "%s/tilec", dir);
    expect_dir(want);

    setenv("XDG_CACHE_HOME", "relative/path", 1); /* ignored, as XDG says */
    snprintf(want, sizeof want, "%s/.cache/tilec", dir);
    expect_dir(want);
    unsetenv("XDG_CACHE_HOME");
    expect_dir(want);

    /* An explicit directory wins over the environment. */
    setenv("TILEC_CACHE_DIR", tdir, 1);
    snprintf(want, sizeof want, "%s/explicit", dir);
    log_capture lc = {0};
    tli_cache *c = open_ok(want, 1, &lc);
    assert_string_equal(tli_cache_dir(c), want);
    tli_cache_close(c);

    /* Nowhere to go: memory only, with the warning. */
    unsetenv("TILEC_CACHE_DIR");
    unsetenv("HOME");
    c = open_ok(NULL, 1, &lc);
    assert_string_equal(tli_cache_dir(c), "");
    assert_int_equal(lc.warns, 1);
    tli_cache_close(c);

    restore_env("TILEC_CACHE_DIR", old_tilec);
    restore_env("XDG_CACHE_HOME", old_xdg);
    restore_env("HOME", old_home);
    rm_rf(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_sha256_incremental),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_memory_only),
        cmocka_unit_test(test_disk_hit),
        cmocka_unit_test(test_corrupt_payload),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_extended),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_wrong_key),
        cmocka_unit_test(test_dir_under_a_file),
        cmocka_unit_test(test_read_only_dir),
        cmocka_unit_test(test_dir_removed_later),
        cmocka_unit_test(test_clear),
        cmocka_unit_test(test_fifo_at_entry),
        cmocka_unit_test(test_dir_at_entry),
        cmocka_unit_test(test_file_at_shard),
        cmocka_unit_test(test_clear_checks_headers),
        cmocka_unit_test(test_if_exists_mode),
        cmocka_unit_test(test_processes),
        cmocka_unit_test(test_env_resolution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
