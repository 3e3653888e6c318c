/* test_pkgconfig.c - `make install` into a fresh prefix, then build the
 * header check program (tests/header/use_header.c) with the flags
 * pkg-config gives: with `--libs` it links libtilec.so, runs with
 * LD_LIBRARY_PATH (or an rpath) and, as documented, does not start without
 * one; with `--static --libs` it links libtilec.a and needs no libtilec.so
 * at all (it used to link the shared library all the same). Needs
 * pkg-config and readelf; runs in the plain build (a sanitized library
 * would need the sanitizer's link flags). */
#include "util.h"

#include <stdbool.h>

static char prefix[64], cmd[2048];

/* Runs a shell command made like printf (kept in cmd for messages). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void need_tools(void)
{
    const char *san = getenv("TILEC_SANITIZE");
    if (san && *san) {
        printf("  skip: the pkg-config check runs in the plain build\n");
        skip();
    }
    if (sh("command -v pkg-config >/dev/null && command -v readelf >/dev/null") != 0) {
        printf("  skip: pkg-config or readelf is not installed\n");
        skip();
    }
}

static int setup(void **state)
{
    (void)state;
    snprintf(prefix, sizeof prefix, "/tmp/tilec-prefix-XXXXXX");
    return mkdtemp(prefix) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return sh("rm -rf '%s'", prefix) == 0 ? 0 : -1;
}

/* Installs (once) and builds the program with `pkg-config <flags>`. */
static void build(const char *flags, const char *out)
{
    static bool installed;
    if (!installed) {
        if (sh("make -s install PREFIX='%s' >'%s/install.log' 2>&1", prefix, prefix) != 0)
            fail_msg("make install PREFIX=%s failed (see %s/install.log)", prefix, prefix);
        installed = true;
    }
    if (sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' cc -std=c11 tests/header/use_header.c "
           "$(PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags %s tilec) -o '%s/%s' 2>'%s/cc.log'",
           prefix, prefix, flags, prefix, out, prefix) != 0)
        fail_msg("cc with `pkg-config %s tilec` failed: %s", flags, cmd);
}

static bool needs_libtilec_so(const char *exe)
{
    return sh("readelf -d '%s/%s' | grep -q 'NEEDED.*libtilec'", prefix, exe) == 0;
}

static void test_shared(void **state)
{
    (void)state;
    need_tools();
    build("--libs", "shared");
    assert_true(needs_libtilec_so("shared"));
    assert_int_equal(sh("LD_LIBRARY_PATH='%s/lib' '%s/shared'", prefix, prefix), 0);
    /* documented: a non-system prefix needs LD_LIBRARY_PATH or an rpath */
    assert_int_not_equal(sh("env -u LD_LIBRARY_PATH '%s/shared' 2>/dev/null", prefix), 0);
    assert_int_equal(sh("PKG_CONFIG_PATH='%s/lib/pkgconfig' cc -std=c11 tests/header/use_header.c "
                        "$(PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --cflags --libs tilec) "
                        "-Wl,-rpath,\"$(PKG_CONFIG_PATH='%s/lib/pkgconfig' pkg-config --variable=libdir tilec)\" "
                        "-o '%s/rpath' && env -u LD_LIBRARY_PATH '%s/rpath'",
                        prefix, prefix, prefix, prefix, prefix),
                     0);
}

static void test_static(void **state)
{
    (void)state;
    need_tools();
    build("--static --libs", "static");
    if (needs_libtilec_so("static"))
        fail_msg("pkg-config --static linked libtilec.so");
    assert_int_equal(sh("env -u LD_LIBRARY_PATH '%s/static'", prefix), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared),
        cmocka_unit_test(test_static),
    };
    return cmocka_run_group_tests_name("pkgconfig", tests, setup, teardown);
}
