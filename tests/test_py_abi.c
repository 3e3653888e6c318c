/*
 * test_py_abi.c - the ctypes structs of bench/tilec_ctypes.py against the
 * layouts the C compiler gives them: `python3 bench/torch_compare.py
 * --check-abi` runs bench/abi_layout ($TILEC_ABI_LAYOUT, else
 * build/bench/abi_layout) and compares. Also checks that the comparison
 * fails on a moved or a missing field. Skips, saying why, without python3.
 * Run from the repository root (make test does); $TILEC_PYBENCH overrides
 * the script's path.
 */
#include "util.h"

#include <sys/wait.h>
#include <unistd.h>

static char workdir[64];

static const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

static const char *layout_prog(void) { return env_or("TILEC_ABI_LAYOUT", "build/bench/abi_layout"); }

/* Runs "python3 <script> --check-abi <args>"; returns its exit status and
 * its output (stdout and stderr) in *out, which the caller frees. */
static int run_check(const char *args, char **out)
{
    char cmd[1024], out_path[128];
    snprintf(out_path, sizeof out_path, "%s/check.txt", workdir);
    snprintf(cmd, sizeof cmd, "python3 '%s' --check-abi %s > '%s' 2>&1",
             env_or("TILEC_PYBENCH", "bench/torch_compare.py"), args, out_path);
    int ws = system(cmd);
    *out = test_read_file(out_path);
    assert_non_null(*out);
    return ws != -1 && WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* The C layout lines with the line starting with `victim` changed by
 * `edit` ('+': its offset plus 8; 'x': dropped), written to a file whose
 * path goes to path. */
static void write_edited_layout(const char *victim, char edit, char *path, size_t len)
{
    char cmd[512];
    snprintf(path, len, "%s/layout.txt", workdir);
    snprintf(cmd, sizeof cmd, "'%s' > '%s'", layout_prog(), path);
    assert_int_equal(system(cmd), 0);
    char *text = test_read_file(path);
    assert_non_null(text);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    int found = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long off, size;
        char name[128];
        if (strncmp(line, victim, strlen(victim)) != 0) {
            fprintf(f, "%s\n", line);
            continue;
        }
        found = 1;
        if (edit == '+' && sscanf(line, "field %127s %lu %lu", name, &off, &size) == 3)
            fprintf(f, "field %s %lu %lu\n", name, off + 8, size);
    }
    fclose(f);
    free(text);
    assert_true(found);
}

static int setup(void **state)
{
    (void)state;
    snprintf(workdir, sizeof workdir, "/tmp/tilec-pyabi-XXXXXX");
    return mkdtemp(workdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const files[] = {"check.txt", "layout.txt"};
    char path[128];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", workdir, files[i]);
        unlink(path); /* absent when the tests skipped */
    }
    return rmdir(workdir);
}

static int python_missing(void)
{
    if (system("command -v python3 > /dev/null 2>&1") == 0)
        return 0;
    print_message("skipped: python3 is not on PATH (the ctypes bindings cannot be checked)\n");
    return 1;
}

static void test_layouts_match(void **state)
{
    (void)state;
    if (python_missing())
        skip();
    char args[256], *out;
    snprintf(args, sizeof args, "--abi-prog '%s'", layout_prog());
    int status = run_check(args, &out);
    if (status != 0 || !strstr(out, "ABI check passed"))
        print_message("%s", out);
    assert_int_equal(status, 0);
    assert_non_null(strstr(out, "ABI check passed"));
    free(out);
}

/* A check that cannot fail proves nothing: a field moved by 8 bytes and a
 * field gone must both be reported. */
static void expect_mismatch(const char *victim, char edit)
{
    char path[128], args[256], *out;
    write_edited_layout(victim, edit, path, sizeof path);
    snprintf(args, sizeof args, "--abi-layout '%s'", path);
    int status = run_check(args, &out);
    if (status != 1 || !strstr(out, "ABI mismatch"))
        print_message("%s", out);
    assert_int_equal(status, 1);
    assert_non_null(strstr(out, victim));
    free(out);
}

static void test_mismatch_detected(void **state)
{
    (void)state;
    if (python_missing())
        skip();
    expect_mismatch("field tl_flash_attn_desc.scale ", '+');
    expect_mismatch("field tl_gemm_desc.schedule ", 'x');
    expect_mismatch("const TL_BF16 ", 'x');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts_match),
        cmocka_unit_test(test_mismatch_detected),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
