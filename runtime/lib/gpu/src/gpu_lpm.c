/* The LPM tables in device buffers (gpu_lpm.h). */
#include <errno.h>
#include <stdlib.h>

#include "offlow/gpu_lpm.h"

int ofl_gpu_lpm4_upload(struct ofl_gpu *g, unsigned first, const struct ofl_lpm4 *t)
{
    int rc = ofl_gpu_table(g, first, t->dir, OFL_LPM4_DIR_ENTRIES * sizeof *t->dir);
    if (rc == 0)
        rc = ofl_gpu_table(g, first + 1, t->tbl24,
                           (size_t)t->blocks * OFL_LPM4_BLOCK * sizeof *t->tbl24);
    if (rc == 0)
        rc = ofl_gpu_table(g, first + 2, t->tbl8, (size_t)t->groups * 256 * sizeof *t->tbl8);
    return rc;
}

/* The copy of table t (built) into device buffers. */
static int upload6(struct ofl_gpu *g, unsigned first, const struct ofl_lpm6 *t)
{
    struct ofl_gpu_lpm6_level *lv = calloc(t->nlv ? t->nlv : 1, sizeof *lv);
    if (!lv) return -ENOMEM;
    for (unsigned i = 0; i < t->nlv; i++) {
        const struct ofl_lpm6_level *l = &t->lv[i];
        const uint64_t *slots = l->packed ? l->p : (const uint64_t *)(const void *)l->wb;
        lv[i] = (struct ofl_gpu_lpm6_level){
            .mhi = l->mhi, .mlo = l->mlo, .off = (uint64_t)(slots - t->arena),
            .mask = l->mask, .shift = l->shift, .packed = l->packed};
    }
    size_t dir2 = ((size_t)t->nblocks << OFL_LPM6_DIR2_BITS) * sizeof *t->dir2;
    size_t dir3 = (t->nblocks3 << OFL_LPM6_DIR3_BITS) * sizeof *t->dir3;
    int rc = ofl_gpu_table(g, first, t->dir1, ((size_t)1 << OFL_LPM6_DIR1_BITS) * sizeof *t->dir1);
    if (rc == 0) rc = ofl_gpu_table(g, first + 1, t->dir2, dir2);
    if (rc == 0) rc = ofl_gpu_table(g, first + 2, t->dir3, dir3);
    if (rc == 0) rc = ofl_gpu_table(g, first + 3, t->tree, (t->ntrees + 1) * sizeof *t->tree);
    if (rc == 0) rc = ofl_gpu_table(g, first + 4, t->node, t->nnodes * sizeof *t->node);
    if (rc == 0) rc = ofl_gpu_table(g, first + 5, lv, t->nlv * sizeof *lv);
    if (rc == 0) rc = ofl_gpu_table(g, first + 6, t->arena, t->arena_words * sizeof *t->arena);
    free(lv);
    return rc;
}

int ofl_gpu_lpm6_upload(struct ofl_gpu *g, unsigned first, const struct ofl_lpm6 *t)
{
    /* A table opened for updates: its current table (a gpu segment's tables take no
     * updates: the device copy would not see them). */
    unsigned slot;
    int rc = upload6(g, first, ofl_lpm6_enter(t, &slot));
    ofl_lpm6_leave(t, slot);
    return rc;
}
