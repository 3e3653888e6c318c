/* test_tune.c - the autotuner on the CPU: its core with a fake runner and
 * clock (outcomes, ranking, the final interleaved round, the budget,
 * progress), the tuning database (round trip, several processes writing at
 * once, damaged and foreign files), the GEMM's schedule choice (database,
 * heuristic table, shape classes), configurations as text, and the
 * request's errors. */
#include "fixture.h"

#include "ctx.h"
#include "tune.h"

#include <ftw.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* A fake runner: each configuration says what its candidate does           */
/* ------------------------------------------------------------------------ */

/* v[0]: what happens; v[1]: screening time, v[2]: final time, in 1/100 ms
 * (v[2] = 0: as screened). */
enum { OK, REJECT, NO_COMPILE, CRASH, WRONG, SLOW_FAIL };

typedef struct fake {
    const tl_tune_config *cfg;
    double clock;            /* seconds                                 */
    double check_s;          /* what a check costs on the clock         */
    int final_reps;
    int baseline_cs;         /* the baseline's time, 1/100 ms (0: none) */
    int fail_interleaved;    /* interleaved timing fails: alone instead */
    int checks, timings;
} fake;

static void fake_compile(void *self, int n, tl_tune_entry *e)
{
    fake *f = self;
    for (int i = 0; i < n; i++) {
        if (f->cfg[i].v[0] == REJECT)
            e[i].outcome = TL_TUNE_REJECTED, e[i].status = TL_ERR_SHAPE, strcpy(e[i].note, "too much smem");
        if (f->cfg[i].v[0] == NO_COMPILE)
            e[i].outcome = TL_TUNE_COMPILE_FAILED, e[i].status = TL_ERR_COMPILE, strcpy(e[i].note, "ptxas");
    }
    f->clock += 1.0;
}

static tl_status fake_check(void *self, int i, tl_check_result *res)
{
    fake *f = self;
    f->checks++;
    f->clock += f->check_s;
    memset(res, 0, sizeof *res);
    res->first_bad = -1;
    if (f->cfg[i].v[0] == CRASH)
        return TL_ERR_CUDA;
    res->pass = f->cfg[i].v[0] != WRONG;
    res->rel_err = res->pass ? 1e-3 : 0.5;
    return TL_OK;
}

static tl_status fake_time(void *self, int n, const int *idx, int warmup, int reps, double *ms)
{
    fake *f = self;
    (void)warmup;
    f->timings++;
    f->clock += 0.01 * n;
    if (n > 1 && f->fail_interleaved)
        return TL_ERR_CUDA;
    bool final = reps == f->final_reps;
    for (int j = 0; j < n; j++) {
        if (idx[j] < 0) {
            ms[j] = f->baseline_cs / 100.0;
            continue;
        }
        const int *v = f->cfg[idx[j]].v;
        if (v[0] == SLOW_FAIL && final)
            return TL_ERR_CUDA;
        ms[j] = (final && v[2] ? v[2] : v[1]) / 100.0;
    }
    return TL_OK;
}

static double fake_now(void *self) { return ((fake *)self)->clock; }
static const char *fake_error(void *self) { (void)self; return "the fake device failed"; }

static tl_tune_result *run_fake(fake *f, const tl_tune_config *cfg, int n, double budget, int finalists,
                                tl_tune_progress_fn progress, void *user)
{
    f->cfg = cfg;
    f->final_reps = 20;
    tli_tune_runner r = {.self = f, .compile = fake_compile, .check = fake_check, .time = fake_time,
                         .now = fake_now, .error = fake_error, .has_baseline = f->baseline_cs > 0,
                         .work = 2e9, .unit = "TFLOP/s"};
    tli_tune_plan plan = {.n = n, .configs = cfg, .budget_s = budget, .screen_reps = 10, .final_reps = 20,
                          .finalists = finalists, .progress = progress, .progress_user = user};
    tl_tune_result *res = tli_tune_result_new(n);
    assert_non_null(res);
    assert_status(tli_tune_run(&r, &plan, res), TL_OK);
    return res;
}

static void test_core_outcomes_and_ranking(void **state)
{
    (void)state;
    const tl_tune_config cfg[] = {
        {{OK, 300}}, {{REJECT}}, {{NO_COMPILE}}, {{OK, 100, 150}}, {{WRONG, 50}}, {{CRASH}}, {{OK, 200, 120}},
        {{OK, 500}},
    };
    fake f = {.baseline_cs = 200};
    tl_tune_result *res = run_fake(&f, cfg, 8, 0, 2, NULL, NULL);
    assert_int_equal(res->n, 8);
    assert_int_equal(res->passed, 4);
    assert_int_equal(res->compiled, 6);
    /* the two fastest screened (3 and 6) were re-timed together: 6 wins */
    const int order[] = {6, 3, 0, 7, 1, 2, 4, 5};
    for (int i = 0; i < 8; i++)
        assert_int_equal(res->entries[i].index, order[i]);
    assert_true(res->entries[0].finalist && res->entries[1].finalist && !res->entries[2].finalist);
    assert_true(fabs(res->entries[0].ms - 1.2) < 1e-12);
    assert_true(fabs(res->entries[2].ms - 3.0) < 1e-12);
    assert_true(fabs(res->baseline_ms - 2.0) < 1e-12);
    assert_true(fabs(res->entries[0].ratio - 2.0 / 1.2) < 1e-12);
    assert_true(fabs(res->entries[0].rate - 2e9 / 1.2e-3 / 1e12) < 1e-9);
    assert_true(fabs(res->baseline_rate - 1.0) < 1e-12);
    const struct { int pos; tl_tune_outcome o; tl_status st; const char *note; } fails[] = {
        {4, TL_TUNE_REJECTED, TL_ERR_SHAPE, "smem"}, {5, TL_TUNE_COMPILE_FAILED, TL_ERR_COMPILE, "ptxas"},
        {6, TL_TUNE_WRONG, TL_OK, "check failed: rel err 5.000e-01"}, {7, TL_TUNE_RUN_FAILED, TL_ERR_CUDA, "fake device"},
    };
    for (int i = 0; i < 4; i++) {
        const tl_tune_entry *e = &res->entries[fails[i].pos];
        assert_int_equal(e->outcome, fails[i].o);
        assert_int_equal(e->status, fails[i].st);
        assert_non_null(strstr(e->note, fails[i].note));
        assert_true(e->ms == 0 && e->ratio == 0);
    }
    assert_string_equal(res->entries[0].text, "p0=0 p1=200 p2=120");
    assert_string_equal(tl_tune_outcome_name(TL_TUNE_WRONG), "wrong");
    tl_tune_result_destroy(res);
}

/* Checks cost 1 s on the fake clock and the budget is 3.5 s: compile (1 s)
 * and three checks fit, the fourth candidate starts at 4.03 s. */
static void test_core_budget(void **state)
{
    (void)state;
    tl_tune_config cfg[10];
    for (int i = 0; i < 10; i++)
        cfg[i] = (tl_tune_config){{OK, 100 + i}};
    fake f = {.check_s = 1.0};
    tl_tune_result *res = run_fake(&f, cfg, 10, 3.5, 4, NULL, NULL);
    assert_int_equal(f.checks, 3);
    assert_int_equal(res->passed, 3);
    for (int i = 3; i < 10; i++) {
        assert_int_equal(res->entries[i].outcome, TL_TUNE_SKIPPED);
        assert_non_null(strstr(res->entries[i].note, "budget of 3.5 s"));
    }
    assert_int_equal(res->entries[0].index, 0);
    assert_true(res->entries[0].finalist); /* the final round is not cut */
    tl_tune_result_destroy(res);
}

typedef struct progress_log {
    int calls, measure_events;
    char first[16], last[16];
    double last_best;
    bool best_grew, left_negative_in_measure;
} progress_log;

static void record_progress(void *user, const tl_tune_progress *p)
{
    progress_log *l = user;
    if (l->calls++ == 0)
        snprintf(l->first, sizeof l->first, "%s", p->phase);
    snprintf(l->last, sizeof l->last, "%s", p->phase);
    if (strcmp(p->phase, "measure") == 0 && p->done > 0) {
        l->measure_events++;
        if (p->left_s < 0)
            l->left_negative_in_measure = true;
        if (l->last_best > 0 && p->best_ms > l->last_best)
            l->best_grew = true;
        l->last_best = p->best_ms;
    }
}

static void test_core_progress(void **state)
{
    (void)state;
    const tl_tune_config cfg[] = {{{OK, 300}}, {{OK, 100}}, {{WRONG}}, {{OK, 200}}};
    fake f = {.check_s = 0.5};
    progress_log l = {0};
    tl_tune_result *res = run_fake(&f, cfg, 4, 0, 4, record_progress, &l);
    assert_string_equal(l.first, "compile");
    assert_string_equal(l.last, "done");
    assert_int_equal(l.measure_events, 4);
    assert_false(l.best_grew);
    assert_false(l.left_negative_in_measure);
    assert_true(fabs(l.last_best - 1.0) < 1e-12);
    /* the stderr reporter, into a file (not a terminal: plain lines) */
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    tl_tune_progress p = {.phase = "measure", .done = 3, .total = 4, .passed = 2, .best_ms = 0.25,
                          .best = "bm=128", .left_s = 12};
    tl_tune_progress_stderr(tmp, &p);
    rewind(tmp);
    char line[256] = "";
    assert_non_null(fgets(line, sizeof line, tmp));
    assert_string_equal(line, "tune: measure: 3/4 measured, 2 passed, best 0.2500 ms (bm=128), about 12 s left\n");
    fclose(tmp);
    tl_tune_result_destroy(res);
}

/* When the interleaved round fails, each finalist is timed alone; the one
 * that fails then is marked and loses its place. */
static void test_core_final_fallback(void **state)
{
    (void)state;
    const tl_tune_config cfg[] = {{{OK, 300}}, {{SLOW_FAIL, 100}}, {{OK, 200, 150}}};
    fake f = {.baseline_cs = 400, .fail_interleaved = 1};
    tl_tune_result *res = run_fake(&f, cfg, 3, 0, 4, NULL, NULL);
    assert_int_equal(res->passed, 2);
    assert_int_equal(res->entries[0].index, 2);
    assert_true(fabs(res->entries[0].ms - 1.5) < 1e-12);
    assert_int_equal(res->entries[1].index, 0);
    assert_int_equal(res->entries[2].index, 1);
    assert_int_equal(res->entries[2].outcome, TL_TUNE_RUN_FAILED);
    assert_true(fabs(res->baseline_ms - 4.0) < 1e-12);
    tl_tune_result_destroy(res);
}

static void test_core_nothing_passes(void **state)
{
    (void)state;
    const tl_tune_config cfg[] = {{{WRONG}}, {{REJECT}}};
    fake f = {.baseline_cs = 100};
    tl_tune_result *res = run_fake(&f, cfg, 2, 0, 4, NULL, NULL);
    assert_int_equal(res->passed, 0);
    assert_true(fabs(res->baseline_ms - 1.0) < 1e-12); /* still measured */
    assert_int_equal(res->entries[0].outcome, TL_TUNE_WRONG); /* in space order */
    assert_int_equal(res->entries[1].outcome, TL_TUNE_REJECTED);
    tl_tune_result_destroy(res);
}

/* ------------------------------------------------------------------------ */
/* Configurations as text                                                    */
/* ------------------------------------------------------------------------ */

static void test_config_text(void **state)
{
    (void)state;
    tl_gemm_schedule s = {128, 256, 64, 4, 256, 8, TL_GEMM_WARP_ROWS, 0, 0, 0, 0, 2, 0, 0, 0};
    tl_tune_config c = tl_gemm_schedule_to_config(&s);
    char buf[160];
    assert_string_equal(tl_tune_config_text("gemm", &c, buf, sizeof buf),
                        "bm=128 bn=256 bk=64 st=4 th=256 sw=8 wp=16 pp=0 sk=0 ab=0 ps=0 cm=2 cn=0 stk=0 gv=0");
    tl_tune_config back;
    assert_true(tli_tune_config_parse(tli_gemm_param_names, buf, &back));
    assert_memory_equal(&back, &c, sizeof c);
    tl_gemm_schedule s2 = tl_gemm_schedule_from_config(&back);
    assert_memory_equal(&s2, &s, sizeof s);
    assert_true(tli_tune_config_parse(tli_gemm_param_names, "pp=1 bm=64", &back));
    assert_int_equal(back.v[0], 64);
    assert_int_equal(back.v[7], 1);
    const char *bad[] = {"", "bm=", "bm=1 bm=2", "zz=3", "bm=12x", "bm = 3", "=4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (tli_tune_config_parse(tli_gemm_param_names, bad[i], &back))
            fail_msg("'%s' parsed", bad[i]);
    assert_string_equal(tl_tune_config_text(NULL, &(tl_tune_config){{3, 0, 5}}, buf, sizeof buf), "p0=3 p1=0 p2=5");
}

/* ------------------------------------------------------------------------ */
/* The database                                                              */
/* ------------------------------------------------------------------------ */

typedef struct log_capture {
    int warns;
    char last[2048];
} log_capture;

static void capture(void *user, tl_log_level level, const char *msg)
{
    log_capture *l = user;
    if (level == TL_LOG_WARN) {
        l->warns++;
        snprintf(l->last, sizeof l->last, "%s", msg);
    }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_rf(const char *dir) { nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS); }

static tl_tune_record record(int i, int j, const char *config)
{
    tl_tune_record r;
    memset(&r, 0, sizeof r);
    snprintf(r.op, sizeof r.op, "gemm");
    snprintf(r.dtypes, sizeof r.dtypes, "bf16->bf16");
    snprintf(r.layout, sizeof r.layout, "nt");
    snprintf(r.shape_class, sizeof r.shape_class, "m%d,n%d,k64", 128 << (i % 8), j);
    snprintf(r.gpu, sizeof r.gpu, "GPU %d", i);
    snprintf(r.version, sizeof r.version, "0.1.0");
    snprintf(r.config, sizeof r.config, "%s", config);
    r.ms = 0.125 + i;
    r.ratio = 0.5;
    snprintf(r.shape, sizeof r.shape, "%dx%dx64", 128 << (i % 8), j);
    r.when = 1700000000 + i;
    return r;
}

static void write_text(const char *dir, const char *text, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tune.db", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(text, 1, len, f);
    fclose(f);
}

static char *read_text(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tune.db", dir);
    return test_read_file(path);
}

static void test_db_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tl_tune_record *recs;
    int n;
    assert_status(tli_tune_file_read(dir, NULL, NULL, &recs, &n), TL_OK); /* no file yet */
    assert_int_equal(n, 0);
    for (int i = 0; i < 3; i++) {
        tl_tune_record r = record(i, 64, "bm=128 bn=256");
        assert_status(tli_tune_file_put(dir, &r, NULL, NULL), TL_OK);
    }
    tl_tune_record odd = record(3, 64, "bm=64");
    snprintf(odd.gpu, sizeof odd.gpu, "tab\there");
    assert_status(tli_tune_file_put(dir, &odd, NULL, NULL), TL_OK);
    tl_tune_record again = record(1, 64, "bm=64 bn=64");
    again.ms = 9.5;
    assert_status(tli_tune_file_put(dir, &again, NULL, NULL), TL_OK); /* replaces record 1 */
    log_capture lc = {0};
    assert_status(tli_tune_file_read(dir, capture, &lc, &recs, &n), TL_OK);
    assert_int_equal(lc.warns, 0);
    assert_int_equal(n, 4);
    tl_tune_record want0 = record(0, 64, "bm=128 bn=256");
    assert_string_equal(recs[0].shape_class, want0.shape_class);
    assert_string_equal(recs[0].config, "bm=128 bn=256");
    assert_true(fabs(recs[0].ms - 0.125) < 1e-9 && recs[0].when == want0.when);
    assert_string_equal(recs[1].config, "bm=64 bn=64");
    assert_true(fabs(recs[1].ms - 9.5) < 1e-9);
    assert_string_equal(recs[3].gpu, "tab here");
    free(recs);
    char *text = read_text(dir);
    assert_non_null(text);
    assert_true(strncmp(text, "tilec-tune-db 1\n", 16) == 0);
    free(text);
    assert_status(tli_tune_file_clear(dir), TL_OK);
    assert_status(tli_tune_file_read(dir, NULL, NULL, &recs, &n), TL_OK);
    assert_int_equal(n, 0);
    rm_rf(dir);
}

/* Several processes write at once, each its own records: none is lost and
 * the file never stops parsing. */
static void test_db_concurrent_writers(void **state)
{
    (void)state;
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    enum { PROCS = 6, EACH = 15 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            for (int j = 0; j < EACH; j++) {
                tl_tune_record r = record(p, 1000 + j, "bm=128");
                tl_tune_record *recs;
                int n;
                if (tli_tune_file_put(dir, &r, NULL, NULL) != TL_OK ||
                    tli_tune_file_read(dir, NULL, NULL, &recs, &n) != TL_OK)
                    _exit(1);
                free(recs);
            }
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    log_capture lc = {0};
    tl_tune_record *recs;
    int n;
    assert_status(tli_tune_file_read(dir, capture, &lc, &recs, &n), TL_OK);
    assert_int_equal(lc.warns, 0);
    assert_int_equal(n, PROCS * EACH);
    for (int p = 0; p < PROCS; p++)
        for (int j = 0; j < EACH; j++) {
            tl_tune_record want = record(p, 1000 + j, "bm=128");
            int found = 0;
            for (int i = 0; i < n; i++)
                found += strcmp(recs[i].gpu, want.gpu) == 0 && strcmp(recs[i].shape_class, want.shape_class) == 0;
            assert_int_equal(found, 1);
        }
    free(recs);
    rm_rf(dir);
}

static void test_db_damaged_and_foreign(void **state)
{
    (void)state;
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* a foreign file: no header, binary bytes */
    const char junk[] = "\x7f" "ELF\0\1\2 not a database\n";
    write_text(dir, junk, sizeof junk - 1);
    log_capture lc = {0};
    tl_tune_record *recs;
    int n;
    assert_status(tli_tune_file_read(dir, capture, &lc, &recs, &n), TL_OK);
    assert_int_equal(n, 0);
    assert_int_equal(lc.warns, 1);
    assert_non_null(strstr(lc.last, "not a tilec tuning database"));
    char *text = read_text(dir);
    assert_true(strncmp(text, "tilec-tune-db 1\n", 16) == 0); /* rebuilt */
    free(text);
    /* a damaged one: good lines around bad ones */
    tl_tune_record a = record(1, 64, "bm=128"), b = record(2, 64, "bm=64");
    assert_status(tli_tune_file_put(dir, &a, NULL, NULL), TL_OK);
    text = read_text(dir);
    char damaged[4096];
    snprintf(damaged, sizeof damaged, "%sgemm\tonly three\tfields\n%s\tx\n", text, "gemm");
    free(text);
    write_text(dir, damaged, strlen(damaged));
    assert_status(tli_tune_file_put(dir, &b, capture, &lc), TL_OK);
    assert_int_equal(lc.warns, 2);
    assert_non_null(strstr(lc.last, "2 lines that do not parse (the first: line 4)"));
    assert_status(tli_tune_file_read(dir, capture, &lc, &recs, &n), TL_OK);
    assert_int_equal(lc.warns, 2); /* already rebuilt */
    assert_int_equal(n, 2);
    assert_string_equal(recs[0].config, "bm=128");
    assert_string_equal(recs[1].config, "bm=64");
    free(recs);
    text = read_text(dir);
    assert_null(strstr(text, "only three"));
    free(text);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* The GEMM's schedule: database, heuristic, classes, space                  */
/* ------------------------------------------------------------------------ */

static tl_ctx *disk_ctx(const char *dir, log_capture *lc)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    o.cache_dir = dir;
    o.log = capture;
    o.log_user = lc;
    tl_ctx *c = NULL;
    assert_status(tl_ctx_create(&o, &c, NULL, 0), TL_OK);
    /* white box: an offline context has no GPU name, so no records; give
     * it one to stand for a GPU */
    snprintf(c->info.name, sizeof c->info.name, "Fake GPU");
    return c;
}

static void save_schedule(tl_ctx *c, const tl_gemm_desc *d, const char *config)
{
    tli_tune_key key;
    tli_gemm_tune_key(d, &key);
    tl_tune_record r;
    tli_tune_record_init(c, &key, &r);
    snprintf(r.config, sizeof r.config, "%s", config);
    r.ms = 1;
    snprintf(r.shape, sizeof r.shape, "x");
    assert_status(tli_tune_db_save(c, &r), TL_OK);
}

static void test_gemm_consults_database(void **state)
{
    (void)state;
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    log_capture lc = {0};
    tl_ctx *c = disk_ctx(dir, &lc);
    assert_non_null(strstr(tl_tune_db_path(c), "/tune.db"));
    tl_gemm_desc d = {.m = 4000, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    assert_int_equal(tl_op_gemm_schedule(c, &d).block_n, 256); /* the heuristic */
    save_schedule(c, &d, "bm=64 bn=128 bk=32 st=4 th=128 sw=8 wp=0 pp=0");
    tl_gemm_schedule want = {64, 128, 32, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    tl_gemm_schedule got = tl_op_gemm_schedule(c, &d);
    assert_memory_equal(&got, &want, sizeof want);
    /* the same class (4096 +- a half power of two), another class, another layout */
    tl_gemm_desc same = d, other = d, nn = d;
    same.m = 5000;
    other.m = 8192;
    nn.trans_b = 0;
    got = tl_op_gemm_schedule(c, &same);
    assert_memory_equal(&got, &want, sizeof want);
    assert_int_equal(tl_op_gemm_schedule(c, &other).block_n, 256);
    assert_int_equal(tl_op_gemm_schedule(c, &nn).block_n, 256);
    /* a new context (a new process) reads the file */
    tl_ctx *c2 = disk_ctx(dir, &lc);
    got = tl_op_gemm_schedule(c2, &d);
    assert_memory_equal(&got, &want, sizeof want);
    tl_tune_record *recs;
    int n;
    assert_status(tl_tune_db_list(c2, &recs, &n), TL_OK);
    assert_int_equal(n, 1);
    assert_string_equal(recs[0].shape_class, "m4096,n4096,k4096");
    tl_free_host(recs);
    /* a record the op cannot use is ignored, with a warning */
    save_schedule(c2, &other, "bm=7 bn=128");
    assert_int_equal(tl_op_gemm_schedule(c2, &other).block_n, 256);
    assert_int_equal(tl_op_gemm_schedule(c2, &other).block_n, 256);
    assert_int_equal(lc.warns, 1); /* once, not at every call */
    assert_non_null(strstr(lc.last, "bm=7"));
    assert_status(tl_tune_db_clear(c2), TL_OK);
    assert_int_equal(tl_op_gemm_schedule(c2, &d).block_n, 256);
    assert_status(tl_tune_db_list(c2, &recs, &n), TL_OK);
    assert_int_equal(n, 0);
    tl_ctx_destroy(c2);
    tl_ctx_destroy(c);
    rm_rf(dir);
}

/* Without a disk cache the records live in the context. */
static void test_database_in_memory(void **state)
{
    (void)state;
    tl_ctx *c = test_offline_ctx("sm_90a");
    snprintf(c->info.name, sizeof c->info.name, "Fake GPU");
    assert_string_equal(tl_tune_db_path(c), "");
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_F16, .out_dtype = TL_F32, .has_bias = 1,
                      .epilogue = TL_EPI_RELU};
    save_schedule(c, &d, "bm=64 bn=64 bk=64 st=3 th=128 sw=0 wp=0 pp=0");
    assert_int_equal(tl_op_gemm_schedule(c, &d).block_m, 64);
    tl_tune_record *recs;
    int n;
    assert_status(tl_tune_db_list(c, &recs, &n), TL_OK);
    assert_int_equal(n, 1);
    assert_string_equal(recs[0].layout, "nn+bias+relu");
    assert_string_equal(recs[0].dtypes, "f16->f32");
    assert_string_equal(recs[0].shape_class, "m<=64,n<=64,k<=64");
    tl_free_host(recs);
    tl_ctx_destroy(c);
}

static void test_heuristic_table(void **state)
{
    (void)state;
    struct { int64_t m, n, k; int bias; tl_gemm_schedule want; } cases[] = {
        {1024, 1024, 1024, 0, {64, 128, 64, 6, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* producer warpgroup, C by TMA */
        {2048, 2048, 2048, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* persistent, C by TMA */
        {8192, 8192, 1024, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {4096, 4096, 4096, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {4096, 4096, 16384, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {4096, 4096, 4096, 1, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* an epilogue too */
        {100, 64, 33, 1, {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}},      /* no TMA; few tiles */
        {8192, 8192, 1020, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, /* K % 8: no producer */
        /* B's rows (K of B as [N, K]) off the 32-byte sectors: B multicast over clusters of 2 along M */
        {4096, 4096, 4104, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 2, 0, 0, 0}},
        {4096, 4104, 4096, 0, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* C's rows: no matter */
        {1000, 1000, 1000, 0, {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* few tiles: 128x128 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_gemm_desc d = {.m = cases[i].m, .n = cases[i].n, .k = cases[i].k, .in_dtype = TL_BF16,
                          .out_dtype = TL_BF16, .trans_b = 1, .has_bias = cases[i].bias};
        tl_gemm_schedule got = tl_op_gemm_schedule(ctx, &d);
        if (memcmp(&got, &cases[i].want, sizeof got) != 0)
            fail_msg("case %zu: got %dx%dx%d s%d th%d pp%d ps%d cm%d", i, got.block_m, got.block_n, got.block_k,
                     got.stages, got.threads, got.pingpong, got.persistent, got.cluster_m);
    }
    /* B as [K, N]: its rows are N long; off the sectors, 256x128 persistent tiles */
    tl_gemm_desc nn = {.m = 3000, .n = 5000, .k = 2000, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tl_gemm_schedule off = tl_op_gemm_schedule(ctx, &nn);
    assert_true(off.cluster_m == 0 && off.persistent == 1 && off.block_m == 256 && off.block_n == 128);
    nn.trans_b = 1; /* the same sizes as [N, K]: rows of 4000 bytes, whole sectors */
    off = tl_op_gemm_schedule(ctx, &nn);
    assert_true(off.cluster_m == 0 && off.persistent == 1 && off.block_m == 128 && off.block_n == 256);
    tl_ctx *c80 = test_offline_ctx("sm_80");
    tl_gemm_desc d = {.m = 1024, .n = 1024, .k = 1024, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tl_gemm_schedule want80 = {128, 256, 32, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    tl_gemm_schedule got = tl_op_gemm_schedule(c80, &d);
    assert_memory_equal(&got, &want80, sizeof got);
    tl_ctx_destroy(c80);
}

static void test_shape_classes(void **state)
{
    (void)state;
    struct { int64_t m, n, k; int tb; const char *cls; } cases[] = {
        {4096, 4096, 4096, 1, "m4096,n4096,k4096"},  {4096, 14336, 4096, 1, "m4096,n16384,k4096"},
        {2896, 2897, 3000, 1, "m2048,n4096,k4096,b-off-sectors"}, {2896, 2897, 3008, 1, "m2048,n4096,k4096"},
        {2896, 2904, 3008, 0, "m2048,n4096,k4096,b-off-sectors"}, {17, 4096, 4096, 1, "m<=64,n4096,k4096"},
        {65, 96, 4096, 1, "m128,n128,k4096"},        {128, 128, 33, 1, "m128,n128,k<=64,unaligned"},
        {128, 127, 64, 0, "m128,n128,k<=64,unaligned"}, {128, 127, 64, 1, "m128,n128,k<=64"},
        {(int64_t)1 << 40, 8, 8, 1, "m1099511627776,n<=64,k<=64,b-off-sectors"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_gemm_desc d = {.m = cases[i].m, .n = cases[i].n, .k = cases[i].k, .in_dtype = TL_BF16,
                          .out_dtype = TL_BF16, .trans_b = cases[i].tb};
        tli_tune_key key;
        tli_gemm_tune_key(&d, &key);
        assert_string_equal(key.shape_class, cases[i].cls);
    }
}

static void test_gemm_space(void **state)
{
    (void)state;
    int all = tl_gemm_candidates(NULL, NULL, NULL, 0);
    assert_true(all >= 20);
    tl_gemm_schedule s[64];
    tl_gemm_desc aligned = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tl_gemm_desc ragged = aligned;
    ragged.k = 33;
    tl_gemm_schedule every[64];
    assert_int_equal(tl_gemm_candidates(NULL, NULL, every, 64), all);
    int pingpong = 0, k32 = 0, clusters = 0;
    for (int i = 0; i < all; i++) {
        pingpong += every[i].pingpong;
        k32 += every[i].block_k == 32;
        clusters += every[i].cluster_m > 1 || every[i].cluster_n > 1;
    }
    assert_true(pingpong > 0 && k32 > 0 && clusters > 0);
    /* sm_90a: no K step of 32 (those lower to mma.sync, not wgmma) */
    int n = tl_gemm_candidates(ctx, &aligned, s, 64);
    assert_int_equal(n, all - k32);
    for (int i = 0; i < n; i++)
        assert_int_equal(s[i].block_k, 64);
    assert_int_equal(tl_gemm_candidates(ctx, &ragged, s, 64), all - k32 - pingpong);
    /* sm_80: every K step, no ping-pong, no clusters */
    tl_ctx *c80 = test_offline_ctx("sm_80");
    assert_int_equal(tl_gemm_candidates(c80, &aligned, s, 2), all - pingpong - clusters); /* counts past max */
    tl_ctx_destroy(c80);
}

/* Where the GEMM's heuristic splits K (decode shapes), tl_op_gemm keeps it and
 * reads no record; the tuner, which times one-pass programs, must then save
 * nothing (on the H200 it recorded a 0.71x-of-cuBLAS schedule for 1x4096x4096
 * NN, reported as "the op now runs", while the op went on splitting at 1.19x). */
static void test_gemm_split_shapes_record_nothing(void **state)
{
    (void)state;
    const tli_tune_op *op = tli_tune_op_find("gemm");
    assert_non_null(op);
    assert_non_null(op->ignores_records);
    tl_gemm_desc split = {.m = 1, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tl_gemm_desc square = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    char why[160] = "";
    assert_true(tli_gemm_heuristic(ctx, &split).split_k > 1);
    assert_true(op->ignores_records(ctx, &split, why, sizeof why));
    assert_non_null(strstr(why, "splits K"));
    assert_true(tli_gemm_heuristic(ctx, &square).split_k < 2);
    assert_false(op->ignores_records(ctx, &square, why, sizeof why));
    /* and the op indeed ignores a record there: one saved by hand changes nothing */
    tli_tune_key key;
    op->key(&split, &key);
    tl_tune_record rec;
    tli_tune_record_init(ctx, &key, &rec);
    snprintf(rec.config, sizeof rec.config, "bm=64 bn=128 bk=64 st=6 th=128 sw=8");
    assert_status(tli_tune_db_save(ctx, &rec), TL_OK);
    tl_gemm_schedule picked = tl_op_gemm_schedule(ctx, &split);
    assert_true(picked.split_k > 1);
    tli_tune_db_forget(ctx, &key);
}

/* tl_autotune measures the op's untuned choice first: with a budget that
 * runs out after a few candidates (16384^3 takes ~20 ms a run) the record
 * can then never be slower than no tuning. On the H200 the space's order
 * once recorded 128x128x32 schedules at 0.66x the heuristic's speed. */
static void test_space_leads_with_fallback(void **state)
{
    (void)state;
    const tli_tune_op *op = tli_tune_op_find("gemm");
    assert_non_null(op);
    const tl_gemm_desc shapes[] = {
        {.m = 16384, .n = 16384, .k = 16384, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1},
        {.m = 8192, .n = 8192, .k = 1024, .in_dtype = TL_BF16, .out_dtype = TL_BF16},
        {.m = 1024, .n = 1024, .k = 1024, .in_dtype = TL_F16, .out_dtype = TL_F32, .trans_b = 1},
        {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .has_bias = 1,
         .epilogue = TL_EPI_GELU_TANH},
    };
    tl_tune_config cfg[256], plain[256];
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int n = tli_tune_op_space(ctx, op, &shapes[i], cfg, 256);
        int m = op->space(ctx, &shapes[i], plain, 256);
        tl_gemm_schedule h = tli_gemm_heuristic(ctx, &shapes[i]);
        tl_tune_config want = tl_gemm_schedule_to_config(&h);
        assert_memory_equal(&cfg[0], &want, sizeof want);
        assert_int_equal(n, m); /* the heuristic's schedules are all in the space: moved, not added */
        for (int a = 0; a < n; a++) /* nothing twice, nothing lost */
            for (int b = a + 1; b < n; b++)
                assert_memory_not_equal(&cfg[a], &cfg[b], sizeof cfg[a]);
        for (int b = 0; b < m; b++) {
            int found = 0;
            for (int a = 0; a < n; a++)
                found += memcmp(&cfg[a], &plain[b], sizeof cfg[a]) == 0;
            assert_int_equal(found, 1);
        }
    }
    /* max smaller than the space: the fallback still leads */
    tl_gemm_schedule h = tli_gemm_heuristic(ctx, &shapes[0]);
    tl_tune_config want = tl_gemm_schedule_to_config(&h);
    assert_int_equal(tli_tune_op_space(ctx, op, &shapes[0], cfg, 3), 3);
    assert_memory_equal(&cfg[0], &want, sizeof want);
    /* the softmax leads with its untuned schedule, the ring of 2 past 16384
     * columns, filled by a producer warpgroup beside 512 threads */
    op = tli_tune_op_find("softmax");
    tl_softmax_desc wide = {.rows = 2048, .cols = 32768, .in_dtype = TL_F16, .out_dtype = TL_F16};
    int n = tli_tune_op_space(ctx, op, &wide, cfg, 256);
    assert_true(n > 1);
    assert_int_equal(cfg[0].v[0], 32768);
    assert_int_equal(cfg[0].v[2], 512);
    assert_int_equal(cfg[0].v[3], 2);
    assert_int_equal(cfg[0].v[5], 2);
    for (int i = 1; i < n; i++) /* the space's own: the block's threads fill the ring */
        assert_int_equal(cfg[i].v[5], 1);
    tl_softmax_desc narrow = {.rows = 16384, .cols = 1024, .in_dtype = TL_F16, .out_dtype = TL_F16};
    tl_softmax_schedule u = tli_softmax_untuned(ctx, &narrow);
    tli_tune_op_space(ctx, op, &narrow, cfg, 256);
    assert_int_equal(cfg[0].v[0], u.width);
    assert_int_equal(cfg[0].v[1], u.rows);
    assert_int_equal(cfg[0].v[2], u.threads);
    assert_int_equal(cfg[0].v[3], u.stages);
    assert_int_equal(u.threads, 128);
}

/* ------------------------------------------------------------------------ */
/* The real runner's compile step, offline                                   */
/* ------------------------------------------------------------------------ */

/* v = {elements per block, threads, shared tile of floats (0: none)}. */
static tl_status build_offline(void *user, tl_ctx *c, const tl_tune_config *cfg, tl_kernel **out)
{
    (void)user;
    if (cfg->v[0] == 0)
        return tli_fail(c, TL_ERR_INVALID_ARG, "no kernel for an empty tile");
    tl_kernel *k = tl_kernel_new(c, "offline");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_buf o = tl_param_tensor(k, "C", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, cfg->v[0])), TL_NONE_EXPR, TL_NONE_EXPR, cfg->v[1]);
    if (cfg->v[2]) { /* a shared tile, to go over the shared-memory limit */
        tl_buf sh = tl_alloc_shared(k, TL_F32, 1, (int64_t[]){cfg->v[2]});
        tl_copy(k, tl_tile(k, a, tl_block_idx(k, 0)), tl_all(sh));
        tl_copy(k, tl_all(sh), tl_tile(k, o, tl_block_idx(k, 0)));
    } else {
        tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, cfg->v[0])), tl_parallel1(k, cfg->v[0]));
        tl_store(k, o, &i, tl_load(k, a, &i));
        tl_end(k);
    }
    *out = k;
    return tl_kernel_status(k);
}

typedef struct offline_problem {
    tli_tune_problem base;
    const tl_program *first;
} offline_problem;

static tl_status offline_check(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res)
{
    (void)pb, (void)p, (void)stream;
    memset(res, 0, sizeof *res);
    res->pass = 1;
    return TL_OK;
}

static tl_status offline_run(tli_tune_problem *pb, const tl_program *p, void *stream)
{
    (void)pb, (void)p, (void)stream;
    return TL_OK;
}

static void offline_destroy(tli_tune_problem *pb) { free(pb); }

static tl_status offline_problem_fn(void *user, tl_ctx *c, const tl_program *first, tli_tune_problem **out)
{
    (void)c;
    offline_problem *o = calloc(1, sizeof *o);
    o->base = (tli_tune_problem){.run = offline_run, .check = offline_check, .destroy = offline_destroy};
    o->first = first;
    *(const tl_program **)user = first;
    *out = &o->base;
    return TL_OK;
}

/* Building, the lowering and NVRTC sort the candidates before anything
 * runs: a builder's refusal and a shared-memory overflow are REJECTED with
 * their messages, the rest compile in one batch; timing them then fails
 * (no device), which is a RUN_FAILED per candidate, not an error. */
static void test_runner_compile_offline(void **state)
{
    (void)state;
    const tl_tune_config cfg[] = {{{1024, 256}}, {{0, 256}}, {{1024, 256, 1 << 17}}, {{512, 128}}, {{1024, 100}}};
    const tl_program *first = NULL;
    tli_tune_setup setup = {.ctx = ctx, .n = 5, .configs = cfg, .build = build_offline,
                            .problem = offline_problem_fn, .problem_user = &first};
    tli_tune_plan plan = {.n = 5, .configs = cfg, .screen_reps = 10, .final_reps = 20, .finalists = 4};
    tl_tune_result *res = tli_tune_result_new(5);
    assert_status(tli_tune_with_programs(&setup, &plan, res), TL_OK);
    assert_non_null(first);
    assert_int_equal(res->compiled, 2);
    assert_int_equal(res->passed, 0);
    const struct { int index; tl_tune_outcome o; const char *note; } want[] = {
        {0, TL_TUNE_RUN_FAILED, "no device"},     {1, TL_TUNE_REJECTED, "empty tile"},
        {2, TL_TUNE_REJECTED, "shared memory"},   {3, TL_TUNE_RUN_FAILED, "no device"},
        {4, TL_TUNE_REJECTED, "multiple of 32"},
    };
    for (int i = 0; i < 5; i++) {
        const tl_tune_entry *e = &res->entries[i];
        assert_int_equal(e->index, want[i].index);
        if (e->outcome != want[i].o || !strstr(e->note, want[i].note))
            fail_msg("candidate %d: %s: %s", i, tl_tune_outcome_name(e->outcome), e->note);
    }
    tl_tune_result_destroy(res);
}

/* ------------------------------------------------------------------------ */
/* The softmax as a tunable op                                               */
/* ------------------------------------------------------------------------ */

static void test_softmax_space_and_record(void **state)
{
    (void)state;
    const tli_tune_op *op = tli_tune_op_find("softmax");
    assert_non_null(op);
    tl_softmax_desc d = {.rows = 4000, .cols = 1000, .in_dtype = TL_F16, .out_dtype = TL_F16};
    tli_tune_key key;
    op->key(&d, &key);
    assert_string_equal(key.shape_class, "r4096,c<=1024");
    assert_string_equal(key.dtypes, "f16->f16");
    tl_tune_config cfg[64];
    int n = op->space(ctx, &d, cfg, 64);
    /* one pass: 8, 16, 32 elements per thread x 4 thread counts, without a
     * pipeline and with a ring of 3 stages filled by the block (loader 1:
     * a producer warpgroup only in the default past 16384 columns) */
    assert_int_equal(n, 24);
    for (int i = 0; i < n; i++) {
        tl_softmax_desc one = d;
        one.schedule = (tl_softmax_schedule){.width = cfg[i].v[0], .rows = cfg[i].v[1], .threads = cfg[i].v[2],
                                             .stages = cfg[i].v[3], .loader = cfg[i].v[5]};
        assert_int_equal(one.schedule.width, 1024);
        assert_int_equal(one.schedule.stages, i < 12 ? 1 : 3);
        assert_int_equal(one.schedule.loader, 1);
        tl_kernel *k;
        assert_status(op->build(ctx, &d, &cfg[i], &k), TL_OK); /* every candidate builds */
        tl_kernel_destroy(k);
    }
    d.cols = 100000; /* too long for one pass: chunks only */
    n = op->space(ctx, &d, cfg, 64);
    assert_true(n >= 6);
    for (int i = 0; i < n; i++)
        assert_true(cfg[i].v[0] < 100000 && cfg[i].v[1] == 1);
    /* the op follows a record, and ignores one it cannot use (once) */
    log_capture lc = {0};
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tl_ctx *c = disk_ctx(dir, &lc);
    d.cols = 1000;
    assert_int_equal(tl_op_softmax_schedule(c, &d).rows, 4); /* rows.c's default for 1024 */
    op->key(&d, &key);
    tl_tune_record r;
    tli_tune_record_init(c, &key, &r);
    snprintf(r.config, sizeof r.config, "width=1024 rows=2 threads=128");
    r.ms = 1;
    snprintf(r.shape, sizeof r.shape, "4000x1000");
    assert_status(tli_tune_db_save(c, &r), TL_OK);
    /* a record from before stages (and loader) existed: the default's */
    tl_softmax_desc plain = d;
    plain.schedule.width = 1024;
    tl_softmax_schedule got = tl_op_softmax_schedule(c, &d),
                        want = {.width = 1024, .rows = 2, .threads = 128,
                                .stages = tl_op_softmax_schedule(ctx, &plain).stages, .cluster = 1,
                                .loader = tl_op_softmax_schedule(ctx, &plain).loader};
    assert_memory_equal(&got, &want, sizeof got);
    tl_softmax_desc other = d;
    other.rows = 64; /* another class */
    assert_int_equal(tl_op_softmax_schedule(c, &other).rows, 4);
    snprintf(r.config, sizeof r.config, "width=1000 rows=2 threads=128");
    assert_status(tli_tune_db_save(c, &r), TL_OK);
    assert_int_equal(tl_op_softmax_schedule(c, &d).rows, 4);
    assert_int_equal(tl_op_softmax_schedule(c, &d).rows, 4);
    assert_int_equal(lc.warns, 1);
    tl_ctx_destroy(c);
    rm_rf(dir);
}

/* RMSNorm shares the softmax's space and records of its own: a record for
 * the softmax's class leaves it alone, its own is followed. */
static void test_rmsnorm_space_and_record(void **state)
{
    (void)state;
    const tli_tune_op *op = tli_tune_op_find("rmsnorm"), *sm = tli_tune_op_find("softmax");
    assert_non_null(op);
    tl_rmsnorm_desc d = {.rows = 4000, .cols = 1000, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .eps = 1e-6};
    tl_softmax_desc same = {.rows = 4000, .cols = 1000, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tli_tune_key key, skey;
    op->key(&d, &key);
    sm->key(&same, &skey);
    assert_string_equal(key.op, "rmsnorm");
    assert_string_equal(key.shape_class, skey.shape_class);
    tl_tune_config cfg[64], scfg[64];
    int n = op->space(ctx, &d, cfg, 64);
    assert_int_equal(n, sm->space(ctx, &same, scfg, 64));
    assert_memory_equal(cfg, scfg, (size_t)n * sizeof cfg[0]);
    for (int i = 0; i < n; i++) {
        tl_kernel *k;
        char *text = NULL;
        assert_status(op->build(ctx, &d, &cfg[i], &k), TL_OK);
        assert_status(tl_kernel_dump(k, &text), TL_OK);
        assert_non_null(strstr(text, "rmsnorm"));
        tl_free_host(text);
        tl_kernel_destroy(k);
    }
    tl_tune_config u = op->fallback(ctx, &d); /* without a record: what the op runs */
    tl_softmax_schedule us = tl_op_rmsnorm_schedule(ctx, &d);
    int uv[6] = {us.width, us.rows, us.threads, us.stages, us.cluster, us.loader};
    for (int i = 0; i < 6; i++)
        assert_int_equal(u.v[i], uv[i]);
    tl_rmsnorm_desc neg = d;
    neg.eps = -1;
    assert_status(op->check_desc(ctx, &neg, "t"), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "eps"));

    log_capture lc = {0};
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tl_ctx *c = disk_ctx(dir, &lc);
    tl_softmax_schedule before = tl_op_rmsnorm_schedule(c, &d);
    tl_tune_record r;
    tli_tune_record_init(c, &skey, &r); /* the softmax's record: not RMSNorm's */
    snprintf(r.config, sizeof r.config, "width=1024 rows=2 threads=128 stages=1 cluster=1 loader=1");
    snprintf(r.shape, sizeof r.shape, "4000x1000");
    r.ms = 1;
    assert_status(tli_tune_db_save(c, &r), TL_OK);
    tl_softmax_schedule got = tl_op_rmsnorm_schedule(c, &d);
    assert_memory_equal(&got, &before, sizeof got);
    tli_tune_record_init(c, &key, &r);
    snprintf(r.config, sizeof r.config, "width=1024 rows=8 threads=256 stages=1 cluster=1 loader=1");
    snprintf(r.shape, sizeof r.shape, "4000x1000");
    assert_status(tli_tune_db_save(c, &r), TL_OK);
    got = tl_op_rmsnorm_schedule(c, &d);
    assert_int_equal(got.rows, 8);
    assert_int_equal(got.threads, 256);
    assert_int_equal(tl_op_softmax_schedule(c, &same).rows, 2); /* each op its own record */
    tl_kernel *k = NULL;
    assert_status(tl_op_rmsnorm_build(c, &d, &k), TL_OK);
    tl_kernel_destroy(k);
    assert_int_equal(lc.warns, 0);
    tl_ctx_destroy(c);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* FlashAttention as a tunable op                                            */
/* ------------------------------------------------------------------------ */

static void assert_schedule_is(const tl_flash_attn_schedule *s, const tl_tune_config *c)
{
    int got[7] = {s->block_m, s->block_n, s->stages, s->threads, s->warp_specialize, s->pingpong, s->persistent};
    for (int i = 0; i < 7; i++)
        if (got[i] != c->v[i])
            fail_msg("field %d: %d, want %d", i, got[i], c->v[i]);
}

/* The space leads with the untuned schedule, holds the defaults of other
 * lengths' (they are what was measured best there), and every candidate
 * lowers; the key; the refusals; the op follows a record of its class and
 * ignores one it cannot use, with one warning. */
static void test_flash_attn_space_and_record(void **state)
{
    (void)state;
    const tli_tune_op *op = tli_tune_op_find("flash_attn");
    assert_non_null(op);
    assert_string_equal(op->name, "flash_attn");
    tl_flash_attn_desc d = {.batch = 4, .heads = 16, .kv_heads = 16, .seq_q = 4000, .seq_kv = 4000,
                            .head_dim = 128, .dtype = TL_BF16};
    tli_tune_key key;
    op->key(&d, &key);
    assert_string_equal(key.op, "flash_attn");
    assert_string_equal(key.dtypes, "bf16->bf16");
    assert_string_equal(key.layout, "d128");
    assert_string_equal(key.shape_class, "q4096,k4096,bh64");
    tl_flash_attn_desc causal = d;
    causal.causal = 1;
    causal.batch = 3; /* 48 heads: nearest 64 on a log scale (45 would be 32) */
    op->key(&causal, &key);
    assert_string_equal(key.layout, "d128,causal");
    assert_string_equal(key.shape_class, "q4096,k4096,bh64");
    causal.batch = 2, causal.heads = 22; /* 44 */
    op->key(&causal, &key);
    assert_string_equal(key.shape_class, "q4096,k4096,bh32");

    /* every head_dim and mask on both kinds of target */
    const char *targets[] = {"sm_90a", "sm_80"};
    for (int t = 0; t < 2; t++) {
        tl_ctx_options o = tl_ctx_default_options();
        o.device = TL_NO_DEVICE;
        o.target = targets[t];
        tl_ctx *c = NULL;
        assert_status(tl_ctx_create(&o, &c, NULL, 0), TL_OK);
        for (int hd = 64; hd <= 256; hd *= 2)
            for (int cz = 0; cz < 2; cz++) {
                tl_flash_attn_desc one = d;
                one.head_dim = hd, one.causal = cz, one.heads = 2048 / hd, one.kv_heads = one.heads;
                assert_status(op->check_desc(c, &one, "t"), TL_OK);
                tl_tune_config cfg[128];
                int n = tli_tune_op_space(c, op, &one, cfg, 128);
                tl_flash_attn_schedule u = tli_flash_attn_untuned(c, &one);
                assert_true(n >= 2 && n <= 40);
                assert_schedule_is(&u, &cfg[0]);
                for (int i = 0; i < n; i++) {
                    tl_kernel *k = NULL;
                    char *src = NULL;
                    assert_status(op->build(c, &one, &cfg[i], &k), TL_OK);
                    if (tl_kernel_source(k, targets[t], &src) != TL_OK)
                        fail_msg("%s D %d causal %d, candidate %d: %s", targets[t], hd, cz, i, tl_ctx_error(c));
                    tl_free_host(src);
                    tl_kernel_destroy(k);
                    /* the candidate's own fields, the keys not split */
                    tl_flash_attn_desc as = one;
                    as.schedule = (tl_flash_attn_schedule){cfg[i].v[0], cfg[i].v[1], cfg[i].v[2], cfg[i].v[3],
                                                           cfg[i].v[4], cfg[i].v[5], cfg[i].v[6], 1, 1};
                    tl_flash_attn_schedule got = tl_op_flash_attn_schedule(c, &as);
                    assert_memory_equal(&got, &as.schedule, sizeof got);
                }
                if (t == 0 && hd == 128) { /* the defaults at 2k and 8k keys are candidates at 4k */
                    for (int64_t s = 2048; s <= 8192; s *= 4) {
                        tl_flash_attn_desc other = one;
                        other.seq_q = other.seq_kv = s;
                        tl_flash_attn_schedule od = tli_flash_attn_untuned(c, &other);
                        int found = 0;
                        for (int i = 0; i < n; i++)
                            found += cfg[i].v[0] == od.block_m && cfg[i].v[1] == od.block_n &&
                                     cfg[i].v[2] == od.stages && cfg[i].v[6] == od.persistent;
                        assert_true(found >= 1);
                    }
                }
            }
        tl_ctx_destroy(c);
    }
    /* refused: nothing to time; decoding (stacked grouped-query heads; keys split over blocks) */
    tl_flash_attn_desc empty = d;
    empty.seq_q = 0;
    assert_status(op->check_desc(ctx, &empty, "t"), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "nothing to time"));
    tl_flash_attn_desc gqa = {.batch = 1, .heads = 32, .kv_heads = 8, .seq_q = 1, .seq_kv = 8192,
                              .head_dim = 128, .dtype = TL_BF16};
    assert_status(op->check_desc(ctx, &gqa, "t"), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_ctx_error(ctx), "decoding"));
    tl_flash_attn_desc few = {.batch = 1, .heads = 4, .kv_heads = 4, .seq_q = 256, .seq_kv = 8192,
                              .head_dim = 128, .dtype = TL_BF16};
    assert_status(op->check_desc(ctx, &few, "t"), TL_ERR_UNSUPPORTED);
    few.seq_kv = 512; /* 4 key tiles, too few to split: not decoding */
    assert_status(op->check_desc(ctx, &few, "t"), TL_OK);
    tl_flash_attn_desc bad = d;
    bad.head_dim = 96;
    assert_status(op->check_desc(ctx, &bad, "t"), TL_ERR_UNSUPPORTED);

    /* the op follows a record of its class, the splits its own choice */
    log_capture lc = {0};
    char dir[] = "/tmp/tilec-tune-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tl_ctx *c = disk_ctx(dir, &lc);
    tl_flash_attn_schedule before = tl_op_flash_attn_schedule(c, &d);
    assert_int_equal(before.block_n, 176); /* the default at 4k keys */
    op->key(&d, &key);
    tl_tune_record r;
    tli_tune_record_init(c, &key, &r);
    snprintf(r.config, sizeof r.config, "bm=128 bn=128 st=3 th=256 ws=1 pp=1 ps=2");
    r.ms = 1;
    snprintf(r.shape, sizeof r.shape, "4x16x4000x4000x128");
    assert_status(tli_tune_db_save(c, &r), TL_OK);
    tl_flash_attn_schedule got = tl_op_flash_attn_schedule(c, &d);
    tl_flash_attn_desc explicit = d; /* the record's schedule given, its splits the op's choice */
    explicit.schedule = (tl_flash_attn_schedule){.block_m = 128, .block_n = 128, .stages = 3, .threads = 256,
                                                 .warp_specialize = 1, .pingpong = 1, .persistent = 2};
    tl_flash_attn_schedule want = tl_op_flash_attn_schedule(c, &explicit);
    assert_int_equal(want.block_n, 128);
    assert_memory_equal(&got, &want, sizeof got);
    tl_kernel *k = NULL;
    assert_status(tl_op_flash_attn_build(c, &d, &k), TL_OK);
    tl_kernel_destroy(k);
    tl_flash_attn_desc given = d; /* a schedule given: no record */
    given.schedule.block_n = 160;
    assert_int_equal(tl_op_flash_attn_schedule(c, &given).block_n, 160);
    assert_int_equal(tl_op_flash_attn_schedule(c, &given).stages, before.stages);
    tl_flash_attn_desc other = d; /* another class */
    other.causal = 1;
    assert_int_equal(tl_op_flash_attn_schedule(c, &other).block_n, tli_flash_attn_untuned(c, &other).block_n);
    assert_int_equal(lc.warns, 0);
    /* a record the op cannot use: one warning, then the default */
    snprintf(r.config, sizeof r.config, "bm=128 bn=128 st=3 th=128 ws=1 pp=1 ps=2");
    assert_status(tli_tune_db_save(c, &r), TL_OK);
    got = tl_op_flash_attn_schedule(c, &d);
    assert_memory_equal(&got, &before, sizeof got);
    got = tl_op_flash_attn_schedule(c, &d);
    assert_memory_equal(&got, &before, sizeof got);
    assert_int_equal(lc.warns, 1);
    tl_ctx_destroy(c);
    rm_rf(dir);
}

/* ------------------------------------------------------------------------ */
/* The request                                                               */
/* ------------------------------------------------------------------------ */

static tl_status never_built(void *user, tl_ctx *c, const tl_tune_config *cfg, tl_kernel **out)
{
    (void)user, (void)c, (void)cfg, (void)out;
    return TL_ERR_INTERNAL;
}

static void test_request_errors(void **state)
{
    (void)state;
    tl_tune_result *res = (tl_tune_result *)1;
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    assert_status(tl_autotune(NULL, &(tl_tune_request){.op = "gemm", .desc = &d}, &res), TL_ERR_INVALID_ARG);
    assert_status(tl_autotune(ctx, NULL, &res), TL_ERR_INVALID_ARG);
    assert_status(tl_autotune(ctx, &(tl_tune_request){.op = "gemm", .desc = &d}, NULL), TL_ERR_INVALID_ARG);
    struct { tl_tune_request q; tl_status st; const char *msg; } cases[] = {
        {{.op = "conv", .desc = &d}, TL_ERR_INVALID_ARG, "tunable: gemm, softmax, rmsnorm, flash_attn"},
        {{.op = "gemm"}, TL_ERR_INVALID_ARG, "descriptor"},
        {{.op = "gemm", .desc = &(tl_gemm_desc){.m = 0, .n = 1, .k = 1, .in_dtype = TL_BF16}}, TL_ERR_INVALID_ARG,
         "M, N, K"},
        {{0}, TL_ERR_INVALID_ARG, "build callback"},
        {{.build = never_built, .save = 1}, TL_ERR_INVALID_ARG, "prebuilt ops only"},
        {{.op = "gemm", .desc = &d, .budget_s = -1}, TL_ERR_INVALID_ARG, "budget_s"},
        {{.op = "gemm", .desc = &d, .finalists = 65}, TL_ERR_INVALID_ARG, "finalists"},
        {{.op = "gemm", .desc = &d, .nconfigs = 2}, TL_ERR_INVALID_ARG, "configs is NULL"},
        {{.op = "gemm", .desc = &d}, TL_ERR_NO_DEVICE, "no device"},
        {{.build = never_built}, TL_ERR_NO_DEVICE, "no device"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_status st = tl_autotune(ctx, &cases[i].q, &res);
        if (st != cases[i].st || !strstr(tl_ctx_error(ctx), cases[i].msg))
            fail_msg("case %zu: %s: %s", i, tl_status_name(st), tl_ctx_error(ctx));
        assert_null(res);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_outcomes_and_ranking),
        cmocka_unit_test(test_core_budget),
        cmocka_unit_test(test_core_progress),
        cmocka_unit_test(test_core_final_fallback),
        cmocka_unit_test(test_core_nothing_passes),
        cmocka_unit_test(test_config_text),
        cmocka_unit_test(test_db_round_trip),
        cmocka_unit_test(test_db_concurrent_writers),
        cmocka_unit_test(test_db_damaged_and_foreign),
        cmocka_unit_test(test_gemm_consults_database),
        cmocka_unit_test(test_database_in_memory),
        cmocka_unit_test(test_heuristic_table),
        cmocka_unit_test(test_shape_classes),
        cmocka_unit_test(test_gemm_space),
        cmocka_unit_test(test_space_leads_with_fallback),
        cmocka_unit_test(test_runner_compile_offline),
        cmocka_unit_test(test_softmax_space_and_record),
        cmocka_unit_test(test_rmsnorm_space_and_record),
        cmocka_unit_test(test_flash_attn_space_and_record),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_gemm_split_shapes_record_nothing),
    };
    return cmocka_run_group_tests_name("tune", tests, offline_setup, ctx_teardown);
}
