/*
 * target.h - compile targets as data. One description per target: its
 * limits, its features, the matrix-multiply atoms and the copy engines it
 * offers, in the order the lowering prefers them. The description is chosen
 * once per compile (tli_target_get); nothing else in the library compares
 * target names.
 */
#ifndef TILEC_TARGET_H
#define TILEC_TARGET_H

#include "internal.h"

/* Matrix-multiply atoms, best first in a target's list. */
typedef enum tli_mma_atom {
    MMA_NONE = 0,
    MMA_WGMMA_M64NNK16, /* wgmma.mma_async: a warpgroup, A and B in shared memory (or A in registers) */
    MMA_SYNC_M16N8K16   /* mma.sync: a warp, operands in registers (ldmatrix) */
} tli_mma_atom;

/* Engines that move a tile from global to shared memory. */
typedef enum tli_copy_engine {
    COPY_ENGINE_NONE = 0,
    COPY_ENGINE_TMA,      /* cp.async.bulk.tensor: one thread, a tensor map, an mbarrier */
    COPY_ENGINE_CP_ASYNC, /* cp.async: 16 bytes a thread, commit/wait groups */
    COPY_ENGINE_LDST      /* plain loads and stores */
} tli_copy_engine;

#define TLI_MAX_ATOMS 3

typedef struct tli_target {
    char name[16];         /* canonical: "sm_80", "sm_90a", ... */
    int sm;                /* 80, 86, 89, 90, 100, ... */
    bool arch_specific;    /* the "a" variant: runs on exactly that GPU */
    int64_t smem_limit;    /* dynamic shared memory per block (opt-in), bytes */
    int64_t smem_per_sm;
    int regs_per_sm;
    int max_threads;       /* per block */
    int max_regs_thread;   /* per thread */
    bool mbarrier;         /* mbarrier objects in shared memory */
    bool setmaxnreg;       /* per-warpgroup register reallocation */
    bool clusters;         /* thread-block clusters */
    bool mbarrier_init_fence; /* fence.mbarrier_init: makes initialised mbarriers visible to TMA */
    tli_mma_atom mma[TLI_MAX_ATOMS];         /* best first, MMA_NONE-terminated */
    tli_copy_engine copy[TLI_MAX_ATOMS];     /* best first, COPY_ENGINE_NONE-terminated */
} tli_target;

/* Describes the target `name` ("sm_" digits, optionally "a"). false when
 * the name is malformed or the architecture is older than sm_70, which the
 * library does not generate code for. */
bool tli_target_get(const char *name, tli_target *out);

/* Whether t offers an atom / a copy engine. */
bool tli_target_has_mma(const tli_target *t, tli_mma_atom a);
bool tli_target_has_copy(const tli_target *t, tli_copy_engine e);

/* A cubin for target t runs on a GPU of compute capability major.minor:
 * the same major version and an equal or later minor one; an
 * arch-specific ("a") cubin only on exactly its own. */
bool tli_target_runs_on(const tli_target *t, int cc_major, int cc_minor);

/* The target tl_compile aims at for a GPU of compute capability
 * major.minor: the arch-specific variant where one exists (9.0 -> sm_90a,
 * 10.0 -> sm_100a), else sm_<major><minor>. */
void tli_target_for_device(int cc_major, int cc_minor, char *out, size_t len);

#endif
