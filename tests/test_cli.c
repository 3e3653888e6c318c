/*
 * test_cli.c - the command-line tool, run as a user runs it: bin/tilec (or
 * $TILEC_BIN) through the shell, checking exit status, stdout and stderr.
 * Every command here works without a GPU; the PTX and compile checks skip,
 * saying why, where NVRTC cannot be loaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tilec.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *tool;    /* path of the tool under test           */
static char workdir[64];    /* mkdtemp: stderr captures, caches      */

typedef struct run_result {
    int status;             /* exit status; -1 when it did not exit  */
    char *out, *err;        /* all of stdout and stderr              */
} run_result;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static char *read_stream(FILE *f)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (size_t n; (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    return buf;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *s = read_stream(f);
    fclose(f);
    return s;
}

/* Runs "<tool> <args>" with stdout through a pipe and stderr to a file. */
static run_result run(const char *fmt, ...)
{
    char args[1024], err_path[128], cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", workdir);
    snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s'", tool, args, err_path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    run_result r;
    r.out = read_stream(p);
    int ws = pclose(p);
    r.status = (ws != -1 && WIFEXITED(ws)) ? WEXITSTATUS(ws) : -1;
    r.err = read_file(err_path);
    return r;
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* Fails with the tool's whole output, so a failure explains itself. */
static void expect(const run_result *r, int ok, const char *what)
{
    if (ok)
        return;
    /* print_message is not length-limited the way fail_msg is. */
    print_message("--- stdout ---\n%s\n--- stderr ---\n%s\n--- exit status %d\n", r->out, r->err,
                  r->status);
    fail_msg("%s", what);
}

static void expect_status(const run_result *r, int status)
{
    char what[64];
    snprintf(what, sizeof what, "expected exit status %d", status);
    expect(r, r->status == status, what);
}

static void expect_out(const run_result *r, const char *needle)
{
    char what[256];
    snprintf(what, sizeof what, "stdout lacks \"%s\"", needle);
    expect(r, strstr(r->out, needle) != NULL, what);
}

static void expect_err(const run_result *r, const char *needle)
{
    char what[256];
    snprintf(what, sizeof what, "stderr lacks \"%s\"", needle);
    expect(r, strstr(r->err, needle) != NULL, what);
}

/* PTX and cubins need NVRTC; generating CUDA C does not. */
static int nvrtc_missing(void)
{
    int major = 0;
    char msg[512];
    tl_runtime_versions(NULL, &major, NULL, msg, sizeof msg);
    if (major == 0)
        print_message("skipped: NVRTC cannot be loaded (%s)\n", msg);
    return major == 0;
}

/* The number after "entries:" in `cache stats` output; -1 when absent. */
static long stats_entries(const char *out)
{
    const char *p = strstr(out, "entries:");
    return p ? strtol(p + strlen("entries:"), NULL, 10) : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

static int setup_all(void **state)
{
    (void)state;
    tool = getenv("TILEC_BIN");
    if (!tool || !*tool)
        tool = "bin/tilec";
    if (access(tool, X_OK) != 0) {
        fprintf(stderr, "test_cli: %s is not an executable; build it with 'make' and run the "
                "tests from the repository root (or set TILEC_BIN)\n", tool);
        return -1;
    }
    snprintf(workdir, sizeof workdir, "/tmp/tilec-cli-XXXXXX");
    if (!mkdtemp(workdir))
        return -1;
    /* Whatever a command caches by default lands here, not in ~/.cache. */
    char env_cache[128];
    snprintf(env_cache, sizeof env_cache, "%s/env-cache", workdir);
    setenv("TILEC_CACHE_DIR", env_cache, 1);
    return 0;
}

static int teardown_all(void **state)
{
    (void)state;
    if (workdir[0])
        nftw(workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Usage                                                                     */
/* ------------------------------------------------------------------------ */

static void test_help(void **state)
{
    (void)state;
    const char *forms[] = {"help", "--help", ""};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        run_result r = run("%s", forms[i]);
        expect_status(&r, 0);
        expect_out(&r, "usage: tilec");
        const char *commands[] = {"info", "source", "ptx", "ptxas", "compile", "cache stats", "cache clear"};
        for (size_t j = 0; j < sizeof commands / sizeof commands[0]; j++)
            expect_out(&r, commands[j]);
        expect_out(&r, "ops: vadd");
        run_free(&r);
    }
}

static void test_bad_usage(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"frobnicate", "unknown command"},
        {"source vadd --no-such-option", "unknown option"},
        {"source", "takes 1 argument"},
        {"source vadd extra", "takes 1 argument"},
        {"source vadd --dtype f8", "unknown dtype"},
        {"source vadd --arch", "needs a value"},
        {"info --arch sm_80", "does not apply"},
        {"info --device minus-one", "bad device"},
        {"cache", "takes 1 argument"},
        {"cache purge", "unknown cache command"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run("%s", cases[i][0]);
        expect_status(&r, 2);
        expect_err(&r, cases[i][1]);
        expect(&r, r.out[0] == '\0', "bad usage printed to stdout");
        run_free(&r);
    }
}

static void test_unknown_op(void **state)
{
    (void)state;
    const char *commands[] = {"source", "ptx", "ptxas", "compile"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        run_result r = run("%s no_such_op", commands[i]);
        expect_status(&r, 2);
        expect_err(&r, "unknown op 'no_such_op'");
        expect_err(&r, "vadd"); /* it says which ops there are */
        run_free(&r);
    }
}

/* ------------------------------------------------------------------------ */
/* info                                                                      */
/* ------------------------------------------------------------------------ */

static void test_info(void **state)
{
    (void)state;
    run_result r = run("info");
    expect_status(&r, 0);
    expect_out(&r, "libtilec " TILEC_VERSION_STRING);
    expect_out(&r, "NVRTC:");
    expect_out(&r, "device 0:");
    int has_gpu = strstr(r.out, "compute capability") != NULL;
    if (has_gpu) {
        expect_out(&r, "SMs");
        expect_out(&r, "compile target");
    } else {
        expect_out(&r, "none (TL_ERR_NO_");
        expect_out(&r, "Without a GPU, kernels can still be generated");
    }
    run_free(&r);
}

/* ------------------------------------------------------------------------ */
/* source and ptx                                                            */
/* ------------------------------------------------------------------------ */

static void test_source(void **state)
{
    (void)state;
    run_result r = run("source vadd --arch sm_80");
    expect_status(&r, 0);
    expect_out(&r, "extern \"C\" __global__");
    expect_out(&r, "#include \"tl_device.cuh\"");
    expect_out(&r, "for sm_80");
    expect(&r, strstr(r.out, "#include <") == NULL, "generated source includes a system header");
    expect(&r, r.err[0] == '\0', "source wrote to stderr");
    run_free(&r);
}

/* dump: the builder graph, or the kernel after a pass (the pass pipeline's
 * window for a bug report); a pass that does not exist names the passes. */
static void test_dump(void **state)
{
    (void)state;
    run_result r = run("dump vadd");
    expect_status(&r, 0);
    expect_out(&r, "kernel vadd_f32");
    expect_out(&r, "parallel [4096]");
    run_free(&r);
    r = run("dump gemm --after pipeline --arch sm_90a");
    expect_status(&r, 0);
    expect_out(&r, "after pass 'pipeline' (sm_90a)");
    expect_out(&r, "mbarrier");
    run_free(&r);
    r = run("dump flash_attn --after all");
    expect_status(&r, 0);
    expect_out(&r, "after pass 'verify'");
    expect_out(&r, "after pass 'launch'");
    run_free(&r);
    r = run("dump vadd --after nope");
    expect_status(&r, 1);
    expect_err(&r, "unknown pass 'nope'");
    run_free(&r);
    r = run("source vadd --after sync");
    expect_status(&r, 2);
    expect_err(&r, "--after does not apply to 'source'");
    run_free(&r);
}

static void test_source_bf16(void **state)
{
    (void)state;
    run_result r = run("source vadd --dtype bf16");
    expect_status(&r, 0);
    expect_out(&r, "tl_bf16");
    run_free(&r);
}

static void test_ptx(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    const char *archs[] = {"sm_80", "sm_90a"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        run_result r = run("ptx vadd --arch %s", archs[i]);
        expect_status(&r, 0);
        expect_out(&r, ".visible .entry");
        char target[32];
        snprintf(target, sizeof target, ".target %s\n", archs[i]);
        expect_out(&r, target);
        run_free(&r);
    }
}

/* ptxas: the register and spill lines of ptxas's report for the op's kernel,
 * for each target, and nothing on stderr. */
static void test_ptxas(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    const char *archs[] = {"sm_80", "sm_90a"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        run_result r = run("ptxas gemm --arch %s", archs[i]);
        expect_status(&r, 0);
        expect_out(&r, "Used ");
        expect_out(&r, " registers");
        expect_out(&r, "bytes spill stores");
        char entry[64];
        snprintf(entry, sizeof entry, "for '%s'", archs[i]);
        expect_out(&r, entry);
        expect(&r, r.err[0] == '\0', "ptxas wrote to stderr");
        run_free(&r);
    }
}

/* The GEMM's tensor-core path in PTX: mma.sync fed by ldmatrix and cp.async
 * on sm_80; wgmma fed by TMA on sm_90a. `source gemm` is readable CUDA. */
static void test_gemm_ptx_and_source(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    run_result r = run("ptx gemm --arch sm_80");
    expect_status(&r, 0);
    expect_out(&r, "mma.sync.aligned.m16n8k16");
    expect_out(&r, "ldmatrix.sync.aligned");
    expect_out(&r, "cp.async.cg.shared.global");
    run_free(&r);
    r = run("ptx gemm --arch sm_90a");
    expect_status(&r, 0);
    expect_out(&r, "wgmma.mma_async");
    expect_out(&r, "cp.async.bulk.tensor");
    run_free(&r);
    r = run("source gemm");
    expect_status(&r, 0);
    expect_out(&r, "// tl_pipelined");
    expect_out(&r, "extern \"C\" __global__");
    run_free(&r);
    /* 8-bit inputs: B as [N, K], K steps of 32 on wgmma */
    r = run("source gemm --dtype f8e4m3 --arch sm_90a");
    expect_status(&r, 0);
    expect_out(&r, "m64n256k32.f32.e4m3.e4m3");
    run_free(&r);
    r = run("source gemm --dtype f8e5m2 --arch sm_80");
    expect_status(&r, 1);
    expect_err(&r, "8-bit inputs need wgmma");
    run_free(&r);
}

static void test_bad_arch(void **state)
{
    (void)state;
    const char *commands[] = {"source", "ptx", "ptxas", "compile"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        run_result r = run("%s vadd --arch nonsense_arch", commands[i]);
        expect(&r, r.status != 0 && r.status != -1, "a bad --arch did not fail");
        expect_err(&r, "nonsense_arch");
        run_free(&r);
    }
}

static void test_bad_dtype_for_op(void **state)
{
    (void)state;
    /* A dtype the tool parses but vadd does not take: a library error. */
    run_result r = run("source vadd --dtype i32");
    expect_status(&r, 1);
    expect_err(&r, "TL_ERR_DTYPE");
    run_free(&r);
}

/* ------------------------------------------------------------------------ */
/* compile and the cache                                                     */
/* ------------------------------------------------------------------------ */

static void test_compile_and_cache(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    char dir[128];
    snprintf(dir, sizeof dir, "%s/cache", workdir);

    run_result r = run("cache clear --cache-dir '%s'", dir);
    expect_status(&r, 0);
    run_free(&r);

    r = run("compile vadd --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "kernel:       vadd_f32_");
    expect_out(&r, "from cache:   no (compiled now");
    expect_out(&r, "cubin bytes:");
    run_free(&r);

    r = run("compile vadd --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "from cache:   disk hit");
    run_free(&r);

    r = run("cache stats --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, dir);
    expect_out(&r, "enabled");
    expect(&r, stats_entries(r.out) >= 1, "cache stats reports no entry after a compile");
    run_free(&r);

    r = run("cache clear --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "removed");
    run_free(&r);

    r = run("cache stats --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect(&r, stats_entries(r.out) == 0, "cache clear left entries behind");
    run_free(&r);

    r = run("compile vadd --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "compiled now");
    run_free(&r);
}

/* compile --cubin writes the cubin it reports (an ELF of "cubin bytes"),
 * fails with the library's status when the file cannot be written, and is
 * compile's option only. */
static void test_compile_cubin_file(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    char path[160];
    snprintf(path, sizeof path, "%s/vadd.cubin", workdir);
    run_result r = run("compile vadd --arch sm_90a --cubin '%s'", path);
    expect_status(&r, 0);
    expect_out(&r, "cubin file:");
    const char *line = strstr(r.out, "cubin bytes:");
    long reported = line ? strtol(line + strlen("cubin bytes:"), NULL, 10) : -1;
    struct stat st;
    expect(&r, stat(path, &st) == 0, "no cubin file written");
    expect(&r, reported > 0 && st.st_size == reported, "the file's size is not the reported cubin size");
    FILE *f = fopen(path, "rb");
    unsigned char magic[4] = {0};
    expect(&r, f && fread(magic, 1, 4, f) == 4, "cannot read the cubin file back");
    if (f)
        fclose(f);
    expect(&r, memcmp(magic, "\x7f" "ELF", 4) == 0, "the cubin file is not an ELF image");
    run_free(&r);

    r = run("compile vadd --cubin '%s/no/such/dir/x.cubin'", workdir);
    expect_status(&r, 1);
    expect_err(&r, "cannot write the cubin");
    run_free(&r);

    r = run("source vadd --cubin '%s'", path);
    expect_status(&r, 2);
    expect_err(&r, "does not apply");
    run_free(&r);
}

/* Looking at a cache does not make one: stats and clear on a directory
 * that does not exist leave it so (stats used to create it). */
static void test_cache_stats_creates_nothing(void **state)
{
    (void)state;
    char dir[128];
    struct stat st;
    snprintf(dir, sizeof dir, "%s/no-cache-here", workdir);
    run_result r = run("cache stats --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "does not exist");
    expect(&r, stats_entries(r.out) == 0, "entries of a cache that does not exist");
    run_free(&r);
    r = run("cache clear --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "nothing to remove");
    run_free(&r);
    assert_int_not_equal(stat(dir, &st), 0);
}

/* Without --cache-dir the library's default applies: $TILEC_CACHE_DIR
 * (set by setup_all). */
static void test_cache_dir_from_env(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    const char *env_dir = getenv("TILEC_CACHE_DIR");
    run_result r = run("compile vadd --dtype f16 --arch sm_80");
    expect_status(&r, 0);
    expect_out(&r, "target:       sm_80");
    run_free(&r);

    r = run("cache stats");
    expect_status(&r, 0);
    expect_out(&r, env_dir);
    expect(&r, stats_entries(r.out) >= 1, "the compile did not land in $TILEC_CACHE_DIR");
    run_free(&r);
}

/* tune: the database's records listed and cleared (a file written by hand
 * in the documented format, with a damaged line the tool rebuilds with a
 * warning); tuning itself needs a GPU and says so without one; bad usage. */
static void test_tune_list_and_clear(void **state)
{
    (void)state;
    char dir[128], path[160];
    snprintf(dir, sizeof dir, "%s/tune-db", workdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/tune.db", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("tilec-tune-db 1\n# a comment\n"
          "gemm\tbf16->bf16\tnt\tm4096,n4096,k4096\tNVIDIA H200\t0.1.0\t"
          "bm=128 bn=256 bk=64 st=4 th=256 sw=8 wp=0 pp=0\t0.195900\t0.8860\t4096x4096x4096\t1764460800\n"
          "gemm\tdamaged\n", f);
    fclose(f);
    run_result r = run("tune --list --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "1 record");
    expect_out(&r, "gemm bf16->bf16 nt m4096,n4096,k4096 | NVIDIA H200");
    expect_out(&r, "bm=128 bn=256 bk=64 st=4 th=256 sw=8 wp=0 pp=0: 0.1959 ms at 4096x4096x4096");
    expect_err(&r, "rebuilding it from the 1 valid records");
    run_free(&r);
    r = run("tune --clear --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect_out(&r, "removed 1 record from");
    run_free(&r);
    r = run("tune --list --cache-dir '%s'", dir);
    expect_out(&r, "0 records");
    run_free(&r);
}

static void test_tune_usage(void **state)
{
    (void)state;
    const char *bad[] = {"tune", "tune conv", "tune --list gemm", "tune --list --clear", "tune gemm --epilogue x",
                         "tune gemm --budget -1", "tune --list --shape 8x8x8", "tune gemm extra",
                         "bench gemm --bias", "compile vadd --budget 3", "tune softmax --shape 8x8x8",
                         "tune softmax --bias", "tune gemm --dtype f8e4m3", "bench gemm --dtype f32",
                         "tune gemm --causal", "tune --list --causal", "source flash_attn --causal",
                         "tune flash_attn --shape 2x8x640", "tune flash_attn --shape 2x8x640x128x",
                         "tune flash_attn --shape 2x8x0x128", "tune flash_attn --shape 2x8x640x64x128x1",
                         "tune flash_attn --trans-b", "tune rmsnorm --shape 8x8x8", "tune rmsnorm --bias",
                         "tune flash_attn --dtype f32", "tune flash_attn --shape 2x8x640x96",
                         "tune flash_attn --shape 2x8x99999999999999999999x64"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run_result r = run("%s", bad[i]);
        expect_status(&r, 2);
        run_free(&r);
    }
    /* without a GPU: a note and success; with one: a short real tuning run */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/tune-run", workdir);
    run_result r = run("tune gemm --shape 256x256x256 --budget 20 --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect(&r, strstr(r.out, "needs a GPU") || strstr(r.out, "best: bm="), "neither a GPU note nor a result");
    run_free(&r);
    r = run("tune flash_attn --shape 1x16x640x128 --causal --budget 30 --no-save --cache-dir '%s'", dir);
    expect_status(&r, 0);
    expect(&r, strstr(r.out, "needs a GPU") || strstr(r.out, "best: bm="), "neither a GPU note nor a result");
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_bad_usage),
        cmocka_unit_test(test_unknown_op),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_source),
        cmocka_unit_test(test_dump),
        cmocka_unit_test(test_source_bf16),
        cmocka_unit_test(test_ptx),
        cmocka_unit_test(test_ptxas),
        cmocka_unit_test(test_gemm_ptx_and_source),
        cmocka_unit_test(test_bad_arch),
        cmocka_unit_test(test_bad_dtype_for_op),
        cmocka_unit_test(test_compile_and_cache),
        cmocka_unit_test(test_compile_cubin_file),
        cmocka_unit_test(test_cache_dir_from_env),
        cmocka_unit_test(test_tune_list_and_clear),
        cmocka_unit_test(test_tune_usage),
        cmocka_unit_test(test_cache_stats_creates_nothing),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
