/*
 * pass_smem.c - where each shared buffer lives in the block's dynamic
 * shared memory, and whether it all fits.
 *
 * Tiles are placed in declaration order, each taking stages x elements x
 * size bytes (stages: one per pipeline slot, or one per consumer group of a
 * ping-pong CTA, else 1), rounded up to 128 bytes, or to 1024 when some gemm
 * runs on wgmma (its 128-byte swizzle works on 1024-byte atoms, and the
 * dynamic area starts 1024-byte aligned because the kernel declares no
 * static shared memory). A paired gemm's second B tile (smem.after) takes
 * no room of its own: each stage of it sits right after the same stage of
 * its partner, the two one wider tile. The mbarrier arrays come last, 8
 * bytes each. More than the limit is an error that lists every tile's
 * share.
 */
#include "lower.h"

#include <string.h>

/* Places the shared tiles and mbarriers (assign: record their offsets and
 * stages) and returns the bytes they take; detail (when not NULL) lists
 * each tile's share. */
static int64_t place(tli_lowered *L, bool assign, char *detail, size_t detail_size)
{
    const tli_ir *ir = &L->ir;
    int64_t off = 0;
    int64_t align = L->wgmma ? 1024 : 128;
    for (int32_t i = 1; i < ir->b.n; i++) {
        const tli_bnode *b = tli_B(ir, i);
        tli_smem_info own = L->smem[i], *si = assign ? &L->smem[i] : &own;
        if (b->scope != B_SHARED)
            continue;
        if (si->after) /* placed with its partner, below */
            continue;
        if (si->stages < 1)
            si->stages = 1;
        si->stage_elems = tli_buf_elems(b);
        si->offset = off;
        for (int32_t j = 1; j < ir->b.n; j++) /* a tile whose stages follow this one's */
            if (L->smem[j].after == i && tli_B(ir, j)->scope == B_SHARED) {
                tli_smem_info own_j = L->smem[j], *sj = assign ? &L->smem[j] : &own_j;
                if (sj->stages < 1)
                    sj->stages = 1;
                if (sj->stages != si->stages || tli_B(ir, j)->dtype != b->dtype) {
                    tli_low_fail(L, TL_ERR_INTERNAL, "paired tiles '%s' and '%s' have %d and %d stages", b->name,
                                 tli_B(ir, j)->name, si->stages, sj->stages);
                    return off;
                }
                sj->offset = off + si->stage_elems * (int64_t)tl_dtype_size((tl_dtype)b->dtype);
                si->stage_elems += tli_buf_elems(tli_B(ir, j));
                sj->stage_elems = si->stage_elems;
            }
        int64_t bytes = si->stages * si->stage_elems * (int64_t)tl_dtype_size((tl_dtype)b->dtype);
        off += (bytes + align - 1) / align * align;
        if (!detail)
            continue;
        size_t len = strlen(detail);
        tli_fmt(detail + len, detail_size - len, "%s%s: %lldx%lld %s x %d stage%s = %lld", len ? ", " : "", b->name,
                (long long)b->cshape[0], (long long)(b->rank > 1 ? b->cshape[1] : 1), tl_dtype_name((tl_dtype)b->dtype),
                si->stages, si->stages > 1 ? "s" : "", (long long)bytes);
    }
    for (int32_t i = 1; i < ir->b.n; i++)
        if (tli_B(ir, i)->scope == B_MBAR || tli_B(ir, i)->scope == B_WORDS) {
            if (assign) {
                L->smem[i].offset = off;
                L->smem[i].stages = 1;
                L->smem[i].stage_elems = tli_B(ir, i)->cshape[0];
            }
            off += 8 * tli_B(ir, i)->cshape[0];
        }
    return off;
}

int64_t tli_smem_need(tli_lowered *L) { return place(L, false, NULL, 0); }

void tli_pass_smem(tli_lowered *L)
{
    char detail[512] = "";
    int64_t off = place(L, true, detail, sizeof detail);
    if (L->st != TL_OK)
        return;
    L->launch.smem_bytes = off;
    if (off > L->smem_limit)
        tli_low_fail(L, TL_ERR_SHAPE,
                     "tl_alloc_shared: shared memory: %lld bytes per block (%s) exceeds the limit of %lld bytes",
                     (long long)off, detail, (long long)L->smem_limit);
}
