/*
 * tune.h - the autotuner's parts.
 *
 *   tune.c         the core: compile, check, time, rank, through a runner
 *                  (tli_tune_runner) that tests replace with a fake
 *   tune_runner.c  the real runner: builds and compiles candidates with
 *                  tl_compile_many and runs them on a tli_tune_problem
 *   tune_custom.c  the problem of a custom kernel (the caller's arguments)
 *   tune_ops.c     the table of tunable prebuilt ops, and tl_autotune
 *   tune_db.c      the tuning database
 *   tune_progress.c  tl_tune_progress_stderr
 *   ops/gemm_schedule.c, ops/gemm_tune.c  the GEMM's entry
 *   ops/rows_tune.c, ops/flash_attn_tune.c  the row ops', the attention's
 */
#ifndef TILEC_TUNE_H
#define TILEC_TUNE_H

#include "internal.h"

#define TLI_TUNE_MAX_CANDIDATES 4096

/* ------------------------------------------------------------------------ */
/* The core and its runner                                                   */
/* ------------------------------------------------------------------------ */

/* What the core asks of the world. A test gives fakes; tl_autotune gives
 * the real runner (tune_runner.c). */
typedef struct tli_tune_runner {
    void *self;
    /* Builds and compiles candidates 0..n-1. A candidate that fails gets
     * its outcome (REJECTED, COMPILE_FAILED, RUN_FAILED), status and note
     * in e[i]; the others are left as they are (PASSED, TL_OK). */
    void (*compile)(void *self, int n, tl_tune_entry *e);
    /* Runs candidate i once on poisoned outputs and compares with the
     * reference. A status other than TL_OK means it could not run. */
    tl_status (*check)(void *self, int i, tl_check_result *res);
    /* Times candidates idx[0..n-1] (-1: the baseline) together: n = 1 with
     * tl_time, more interleaved. ms[j] gets idx[j]'s median. */
    tl_status (*time)(void *self, int n, const int *idx, int warmup, int reps, double *ms);
    /* A monotonic clock in seconds (the budget and the estimates). */
    double (*now)(void *self);
    /* The message of the last failure (the context's). */
    const char *(*error)(void *self);
    /* Read by the core after compile, which may set them: whether there is
     * a baseline (timed as index -1), the work of one run (flop for
     * "TFLOP/s", bytes for "GB/s"; 0: no rate). */
    int has_baseline;
    double work;
    const char *unit;
} tli_tune_runner;

typedef struct tli_tune_plan {
    int n;
    const tl_tune_config *configs;
    const char *const *param_names; /* NULL: p0, p1, ...                   */
    double budget_s;                 /* 0: none                             */
    int screen_reps, final_reps, finalists;
    tl_tune_progress_fn progress;
    void *progress_user;
} tli_tune_plan;

/* Runs the tuning described by plan through r; *res must be a result with
 * n entries already allocated (tli_tune_result_new). Fills and ranks them.
 * Never fails for a candidate's sake; returns TL_OK. */
tl_status tli_tune_run(const tli_tune_runner *r, const tli_tune_plan *plan, tl_tune_result *res);
/* A zeroed result with n entries; NULL on OOM. */
tl_tune_result *tli_tune_result_new(int n);

/* ------------------------------------------------------------------------ */
/* Problems: what candidates run on                                          */
/* ------------------------------------------------------------------------ */

typedef struct tli_tune_problem tli_tune_problem;
struct tli_tune_problem {
    /* One launch of p on the problem's operands (may rotate copies). */
    tl_status (*run)(tli_tune_problem *pb, const tl_program *p, void *stream);
    /* Runs p once on poisoned outputs and compares with the reference. */
    tl_status (*check)(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res);
    /* One run of the baseline; NULL when there is none. */
    tl_status (*baseline)(tli_tune_problem *pb, void *stream);
    void (*destroy)(tli_tune_problem *pb);
    char baseline_name[64];
    char shape[64];
    double work;
    const char *unit;
};

/* The custom kernel's problem: the caller's arguments, the reference
 * computed once from host copies (ref NULL: p's interpreter). */
tl_status tli_tune_custom_problem(tl_ctx *ctx, const tl_program *p, const tl_tune_request *req,
                                  tli_tune_problem **out);

/* ------------------------------------------------------------------------ */
/* The real runner                                                           */
/* ------------------------------------------------------------------------ */

/* Builds a candidate's kernel. On failure a kernel left in *out (one with
 * an error recorded on it) is destroyed by the runner. */
typedef tl_status (*tli_tune_build_fn)(void *user, tl_ctx *ctx, const tl_tune_config *cfg, tl_kernel **out);
/* Makes the problem once the candidates are compiled; first is the first
 * program that compiled (NULL when none did). */
typedef tl_status (*tli_tune_problem_fn)(void *user, tl_ctx *ctx, const tl_program *first,
                                         tli_tune_problem **out);

typedef struct tli_tune_setup {
    tl_ctx *ctx;
    int n;
    const tl_tune_config *configs;
    tli_tune_build_fn build;
    void *build_user;
    tli_tune_problem_fn problem;
    void *problem_user;
    int compile_threads;
    int safe_variants;  /* compile the candidates' safe variants too: the
                           problem's rows miss the alignment they assume */
    void *stream;
} tli_tune_setup;

/* Runs the core with the real runner over setup, filling res. Errors: the
 * problem's (set-up failures). */
tl_status tli_tune_with_programs(const tli_tune_setup *setup, const tli_tune_plan *plan, tl_tune_result *res);

/* ------------------------------------------------------------------------ */
/* Tunable prebuilt ops                                                      */
/* ------------------------------------------------------------------------ */

/* Where a record belongs, besides the GPU and the library version. */
typedef struct tli_tune_key {
    char op[32], dtypes[32], layout[64], shape_class[64];
} tli_tune_key;

/* One row of the table of tunable ops (tune_ops.c): what it takes to add
 * an op to tl_autotune and to the database. */
typedef struct tli_tune_op {
    const char *name;
    const char *const *param_names;     /* NULL-terminated                  */
    /* TL_OK, or the descriptor's error (message on ctx) */
    tl_status (*check_desc)(tl_ctx *ctx, const void *desc, const char *api);
    /* the op's default space for desc: up to max into out, returns the count */
    int (*space)(tl_ctx *ctx, const void *desc, tl_tune_config *out, int max);
    /* the configuration the op runs for desc when the database has no
     * record (its heuristic): measured first, so that a budget spent early
     * never records a configuration slower than no tuning at all */
    tl_tune_config (*fallback)(tl_ctx *ctx, const void *desc);
    tl_status (*build)(tl_ctx *ctx, const void *desc, const tl_tune_config *cfg, tl_kernel **out);
    /* operands, reference and baseline for desc */
    tl_status (*problem)(tl_ctx *ctx, const void *desc, double tol, tli_tune_problem **out);
    void (*key)(const void *desc, tli_tune_key *out);
    /* whether desc's rows miss the 16-byte alignment the programs assume,
     * so that every candidate runs its safe variant (NULL: never) */
    bool (*unaligned)(const void *desc);
    /* the problem's baseline is the op run untuned, in a way no candidate
     * is (the attention's split of the keys): a record is saved only when
     * the best candidate beat it in the final round */
    bool baseline_untuned;
    /* whether the op would ignore a record for desc (NULL: never), with
     * the reason in why: nothing is then saved, rather than a record the
     * op never reads (the GEMM where its heuristic splits K) */
    bool (*ignores_records)(tl_ctx *ctx, const void *desc, char *why, size_t len);
} tli_tune_op;

/* The op's space for desc, up to max into out, led by its fallback (moved
 * to the front, or added there when the space lacks it): what tl_autotune
 * measures when the request gives no candidates. Returns the count. */
int tli_tune_op_space(tl_ctx *ctx, const tli_tune_op *op, const void *desc, tl_tune_config *out, int max);
/* The row of op name; NULL when it is not tunable. */
const tli_tune_op *tli_tune_op_find(const char *name);
/* "a, b": the tunable ops, for messages, into buf. Returns buf. */
char *tli_tune_op_names(char *buf, size_t len);

/* The end of an op's problem constructor: *out = pb when st is TL_OK;
 * else pb destroyed and st returned with "tl_autotune: setting up the
 * <what>: <the context's message>" on ctx. */
tl_status tli_tune_problem_done(tl_ctx *ctx, tl_status st, tli_tune_problem *pb, const char *what,
                                tli_tune_problem **out);
/* How many copies of a problem's operands (set_bytes each) make one pass
 * over them move more than twice the L2, so that a timed run never finds
 * its inputs there; at most max (tune_ops.c). */
int tli_tune_copies(tl_ctx *ctx, size_t set_bytes, int max);
/* The p of the power of two nearest x on a log scale (2^p when x <
 * 2^(p + 1/2)); 0 for x <= 1 (tune_ops.c). */
int tli_tune_log2_nearest(int64_t x);
/* A size's shape-class bucket, e.g. "m4096", "m<=64" (tune_ops.c). */
void tli_tune_bucket(char axis, int64_t x, char *out, size_t len);

/* Parses "name=value ..." with the given names into *out (missing names
 * give 0); false on an unknown name, a bad number or a repeat. */
bool tli_tune_config_parse(const char *const *names, const char *text, tl_tune_config *out);
/* Formats with names (NULL: p0.. up to the last non-zero value). */
char *tli_tune_config_format(const char *const *names, const tl_tune_config *c, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* The database (tune_db.c)                                                  */
/* ------------------------------------------------------------------------ */

typedef struct tli_tune_db tli_tune_db;

/* The record for key on ctx's GPU and this library version, if any. The
 * file is read once per context, at the first lookup. Offline contexts
 * (no GPU name) have none. */
bool tli_tune_db_find(tl_ctx *ctx, const tli_tune_key *key, tl_tune_record *out);
/* Drops key's record from the context's view (not from the file): a
 * record the op cannot use is warned about once, not at every call. */
void tli_tune_db_forget(tl_ctx *ctx, const tli_tune_key *key);
/* A record the op cannot use for its problem (config, its text): a warning
 * through the log ("... using the untuned schedule"), and key forgotten
 * by the context, so that it is said once. */
void tli_tune_db_unusable(tl_ctx *ctx, const tli_tune_key *key, const char *config);
/* A record for key on ctx's GPU and this library version (the rest zero). */
void tli_tune_record_init(tl_ctx *ctx, const tli_tune_key *key, tl_tune_record *out);
/* Records rec (replacing the one with its key) in the file, under a lock,
 * and in the context. Errors: TL_ERR_IO, TL_ERR_OUT_OF_MEMORY. */
tl_status tli_tune_db_save(tl_ctx *ctx, const tl_tune_record *rec);
/* Frees what the context kept (tl_ctx_destroy). */
void tli_tune_db_free(tli_tune_db *db);

/* The file-level operations under them, on a directory (tests use them
 * with a temporary one). tli_tune_file_put adds or replaces rec; rec NULL
 * only rewrites the file without its bad lines. Both rebuild a damaged or
 * foreign file with a warning through log. */
tl_status tli_tune_file_read(const char *dir, tl_log_fn log, void *log_user, tl_tune_record **out, int *n);
tl_status tli_tune_file_put(const char *dir, const tl_tune_record *rec, tl_log_fn log, void *log_user);
tl_status tli_tune_file_clear(const char *dir);

/* ------------------------------------------------------------------------ */
/* The GEMM (ops/gemm_schedule.c, ops/gemm_tune.c)                           */
/* ------------------------------------------------------------------------ */

extern const char *const tli_gemm_param_names[];
/* The schedule tl_op_gemm runs for an all-zero d->schedule: the database's
 * record for ctx's GPU, else the heuristic table. */
tl_gemm_schedule tli_gemm_pick(tl_ctx *ctx, const tl_gemm_desc *d);
/* What a call's operand rows allow, beside d's sizes (tli_gemm_pick_for). */
enum {
    TLI_GEMM_TMA = 1,  /* TMA can read them (else, whatever d's sizes, a row or
                          batch stride not a multiple of 16 bytes or a
                          pointer-array batch: no ping-pong, and the database's
                          ",unaligned" class) */
    TLI_GEMM_B_OFF = 2 /* B's rows (ldb) are not whole 32-byte sectors: other
                          schedules, the ",b-off-sectors" class */
};
/* Whether rows of B of ldb elements of type `in` take the TLI_GEMM_B_OFF
 * schedules (16-bit inputs whose rows are not whole 32-byte sectors). */
bool tli_gemm_b_rows_off_sectors(int64_t ldb, tl_dtype in);
/* The flags of d's operands stored dense (rows of K, and N for B as [K, N]). */
unsigned tli_gemm_dense_rows(const tl_gemm_desc *d);
/* The same as tli_gemm_pick, for a call whose rows are `rows` (TLI_GEMM_*). */
tl_gemm_schedule tli_gemm_pick_for(tl_ctx *ctx, const tl_gemm_desc *d, unsigned rows);
/* The heuristic table alone (no database), for ctx's target; the GPU's
 * SMs size a split of K (132 without a GPU). */
tl_gemm_schedule tli_gemm_heuristic(tl_ctx *ctx, const tl_gemm_desc *d);
tl_gemm_schedule tli_gemm_heuristic_for(tl_ctx *ctx, const tl_gemm_desc *d, unsigned rows);
/* Its row for any shape, for inputs of type `in` (block_k in 128-byte
 * rows: doubled for 8-bit inputs): the default of a build without a
 * problem. */
tl_gemm_schedule tli_gemm_generic_schedule(const char *target, tl_dtype in);
/* Where d's record goes in the database. */
void tli_gemm_tune_key(const tl_gemm_desc *d, tli_tune_key *out);
/* Whether TMA can read the rows of A and B (K, and N for B as [K, N],
 * multiples of 16 bytes). */
bool tli_gemm_tma_rows(const tl_gemm_desc *d);
/* The tuner's problem for d. */
tl_status tli_gemm_tune_problem(tl_ctx *ctx, const void *desc, double tol, tli_tune_problem **out);
/* The GEMM's row of the table of tunable ops (tune_ops.c). */
extern const tli_tune_op tli_gemm_tune_op;
/* The bias's element type: in_dtype, or out_dtype for 8-bit inputs. */
tl_dtype tli_gemm_bias_dtype(const tl_gemm_desc *d);
/* tl_op_gemm's checks of a descriptor (message on ctx). */
tl_status tli_gemm_check_desc(tl_ctx *ctx, const tl_gemm_desc *d, const char *api);
/* The second kernel of a split-K schedule (ops/gemm.c): C = act(W[0] +
 * ... + W[slices - 1] + bias), launch arguments M, N, W (f32 [slices, M,
 * N]), bias (when d->has_bias), C. */
tl_status tli_gemm_slices_sum_build(tl_ctx *ctx, const tl_gemm_desc *d, int slices, tl_kernel **out);

/* ------------------------------------------------------------------------ */
/* The row softmax and RMSNorm (ops/rows_tune.c)                             */
/* ------------------------------------------------------------------------ */

extern const tli_tune_op tli_softmax_tune_op, tli_rmsnorm_tune_op;
/* The tuning record's schedule for d on ctx's GPU when there is a usable
 * one: true and *out set; else false (the op's default table applies). */
bool tli_softmax_pick(tl_ctx *ctx, const tl_softmax_desc *d, tl_softmax_schedule *out);
bool tli_rmsnorm_pick(tl_ctx *ctx, const tl_rmsnorm_desc *d, tl_softmax_schedule *out);
/* The schedule the op runs for d without a record (ops/softmax.c,
 * ops/rmsnorm.c): the default table's, resolved (stages included). */
tl_softmax_schedule tli_softmax_untuned(tl_ctx *ctx, const tl_softmax_desc *d);
tl_softmax_schedule tli_rmsnorm_untuned(tl_ctx *ctx, const tl_rmsnorm_desc *d);

/* ------------------------------------------------------------------------ */
/* FlashAttention (ops/flash_attn_tune.c)                                    */
/* ------------------------------------------------------------------------ */

extern const tli_tune_op tli_flash_attn_tune_op;
/* The tuning record's schedule for d on ctx's GPU when there is a usable
 * one: true and *out set (block_m to persistent; the splits are left to the
 * caller); else false (the op's default applies). */
bool tli_flash_attn_pick(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_flash_attn_schedule *out);
/* The schedule the op runs for d without a record (ops/flash_attn.c), its
 * splits 0 (the op's choice). */
tl_flash_attn_schedule tli_flash_attn_untuned(tl_ctx *ctx, const tl_flash_attn_desc *d);
/* The shared memory of a block of bm query rows with a ring of st K and V
 * tiles of bn keys, d's head_dim and dtype (ops/flash_attn.c). */
int64_t tli_flash_attn_smem(const tl_flash_attn_desc *d, int bm, int bn, int st);
/* Whether the op runs d as decoding: grouped-query heads stacked as rows,
 * or the keys of every query block split over blocks (ops/flash_attn.c). */
bool tli_flash_attn_decoding(tl_ctx *ctx, const tl_flash_attn_desc *d);
/* The launch arguments of d's one-kernel program (keys not split) on
 * pointers q, k, v, o, lse (ptr[4] used when d->lse). Returns how many it
 * wrote (at most 32). */
int tli_flash_attn_args(const tl_flash_attn_desc *d, const uint64_t ptr[5], tl_arg *args);

#endif
