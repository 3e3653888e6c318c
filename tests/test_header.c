/* test_header.c - include/tilec.h builds cleanly as C11 with gcc and clang
 * and as C++11 and C++17 with g++ and clang++, under -Wall -Wextra
 * -pedantic -Werror, in a program that uses every macro of it (tl_tile,
 * TL_NONE_EXPR, ...), and that program runs. From C++, g++ rejected tl_tile
 * ("taking address of temporary array") and -pedantic warned on
 * TL_NONE_EXPR. A compiler that is not installed is skipped (one line).
 *
 * The program links lib/libtilec.a ($TILEC_LIB); in a sanitizer build
 * ($TILEC_SANITIZE set) the library needs its own compiler's runtime, so
 * there the program is only compiled. */
#include "util.h"

#include <stdbool.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tilec-header-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static bool have(const char *compiler)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", compiler);
    return system(cmd) == 0;
}

static void check(const char *compiler, const char *std, const char *source)
{
    if (!have(compiler)) {
        printf("  skip: %s is not installed\n", compiler);
        skip();
    }
    const char *lib = getenv("TILEC_LIB"), *san = getenv("TILEC_SANITIZE");
    bool link = !san || !*san;
    char out[128], log[128], cmd[1024];
    snprintf(out, sizeof out, "%s/use_header", tmpdir);
    snprintf(log, sizeof log, "%s/log", tmpdir);
    snprintf(cmd, sizeof cmd, "%s -std=%s -Wall -Wextra -pedantic -Werror -Iinclude %s %s %s %s -o %s > %s 2>&1",
             compiler, std, link ? "" : "-c", source, link ? (lib ? lib : "lib/libtilec.a") : "",
             link ? "-ldl -lpthread -lm" : "", out, log);
    if (system(cmd) != 0) {
        char *text = test_read_file(log);
        fail_msg("%s -std=%s does not build the header cleanly:\n%s", compiler, std, text ? text : "");
    }
    if (link && system(out) != 0)
        fail_msg("the %s -std=%s program built but failed", compiler, std);
}

static void test_gcc_c11(void **state) { (void)state; check("gcc", "c11", "tests/header/use_header.c"); }
static void test_clang_c11(void **state) { (void)state; check("clang", "c11", "tests/header/use_header.c"); }
static void test_gxx_cxx11(void **state) { (void)state; check("g++", "c++11", "tests/header/use_header.cpp"); }
static void test_gxx_cxx17(void **state) { (void)state; check("g++", "c++17", "tests/header/use_header.cpp"); }
static void test_clangxx_cxx11(void **state) { (void)state; check("clang++", "c++11", "tests/header/use_header.cpp"); }
static void test_clangxx_cxx17(void **state) { (void)state; check("clang++", "c++17", "tests/header/use_header.cpp"); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gcc_c11),       cmocka_unit_test(test_clang_c11),
        cmocka_unit_test(test_gxx_cxx11),     cmocka_unit_test(test_gxx_cxx17),
        cmocka_unit_test(test_clangxx_cxx11), cmocka_unit_test(test_clangxx_cxx17),
    };
    return cmocka_run_group_tests_name("header", tests, setup, teardown);
}
