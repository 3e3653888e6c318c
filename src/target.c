/*
 * target.c - the description of each compile target. Limits are the
 * per-block opt-in shared memory and the register file of the
 * architecture; features follow the PTX ISA's requirements (cp.async,
 * ldmatrix, mma.sync and mbarrier from sm_80; TMA, clusters from sm_90;
 * wgmma and setmaxnreg only on the arch-specific sm_90a).
 */
#include "target.h"

#include <stdlib.h>
#include <string.h>

/* Shared memory a block may opt into, by architecture. */
static int64_t smem_limit_of(int sm)
{
    if (sm >= 90)
        return 232448; /* 227 KiB: Hopper and later */
    if (sm == 80 || sm == 87)
        return 166912; /* 163 KiB: A100, Orin */
    if (sm >= 86)
        return 101376; /* 99 KiB: consumer Ampere and Ada */
    return 98304;      /* 96 KiB: Volta, Turing */
}

bool tli_target_get(const char *name, tli_target *out)
{
    if (!name || strncmp(name, "sm_", 3) != 0 || strlen(name) >= sizeof out->name)
        return false;
    const char *p = name + 3;
    if (*p < '1' || *p > '9')
        return false;
    int sm = 0;
    for (; *p >= '0' && *p <= '9'; p++)
        sm = sm * 10 + (*p - '0');
    bool a = *p == 'a';
    if (a)
        p++;
    if (*p || sm < 70 || sm > 999)
        return false;
    memset(out, 0, sizeof *out);
    tli_fmt(out->name, sizeof out->name, "%s", name);
    out->sm = sm;
    out->arch_specific = a;
    out->smem_limit = smem_limit_of(sm);
    out->smem_per_sm = sm >= 90 ? 233472 : out->smem_limit + 1024;
    out->regs_per_sm = 65536;
    out->max_threads = 1024;
    out->max_regs_thread = 255;
    out->mbarrier = sm >= 80;
    out->setmaxnreg = sm == 90 && a;
    out->mbarrier_init_fence = sm >= 90;
    out->clusters = sm >= 90;
    int m = 0, c = 0;
    if (sm == 90 && a)
        out->mma[m++] = MMA_WGMMA_M64NNK16;
    if (sm >= 80)
        out->mma[m++] = MMA_SYNC_M16N8K16;
    if (sm >= 90)
        out->copy[c++] = COPY_ENGINE_TMA;
    if (sm >= 80)
        out->copy[c++] = COPY_ENGINE_CP_ASYNC;
    out->copy[c++] = COPY_ENGINE_LDST;
    return true;
}

bool tli_target_has_mma(const tli_target *t, tli_mma_atom a)
{
    for (int i = 0; i < TLI_MAX_ATOMS && t->mma[i]; i++)
        if (t->mma[i] == a)
            return true;
    return false;
}

bool tli_target_has_copy(const tli_target *t, tli_copy_engine e)
{
    for (int i = 0; i < TLI_MAX_ATOMS && t->copy[i]; i++)
        if (t->copy[i] == e)
            return true;
    return false;
}

bool tli_target_runs_on(const tli_target *t, int cc_major, int cc_minor)
{
    int maj = t->sm / 10, min = t->sm % 10;
    if (t->arch_specific)
        return maj == cc_major && min == cc_minor;
    return maj == cc_major && min <= cc_minor;
}

void tli_target_for_device(int cc_major, int cc_minor, char *out, size_t len)
{
    bool specific = (cc_major == 9 || cc_major == 10) && cc_minor == 0;
    tli_fmt(out, len, "sm_%d%d%s", cc_major, cc_minor, specific ? "a" : "");
}
