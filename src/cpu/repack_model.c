/* repack_model.c — the CPU backend's model-wide repacking: once per model, the
 * matmul weights whose type has a packed gemm at this CPU level are copied into
 * one allocation in the interleaved layout (cpu/repack.h; th_model_params.thp: 2 MiB pages) and hung off their
 * th_weight (w->packed), and the experts' own copies to their slots (th_expert_slot.packed). */
#include "cpu/forward.h"
#include "cpu/repack.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The weights the CPU forward pass multiplies with (th_fwd_matmul). */
static int matmul_weights(th_model *m, th_weight **out, int cap) {
    int n = 0;
#define W(x) do { if ((x).data && n < cap) out[n++] = &(x); } while (0)
    W(m->output);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        th_layer *L = &m->layers[il];
        W(L->wq); W(L->wk); W(L->wv); W(L->wo); W(L->wqkv);
        W(L->wq_a); W(L->wq_b); W(L->wkv_a_mqa); W(L->wkv_b);
        W(L->w_gate); W(L->w_up); W(L->w_down);
        W(L->gate_exps); W(L->up_exps); W(L->down_exps);
        W(L->gate_shexp); W(L->up_shexp); W(L->down_shexp);
        W(L->ssm_in); W(L->ssm_ba); W(L->ssm_qkv); W(L->ssm_gate);   /* DeltaNet projections (cpu/deltanet.c) */
        W(L->ssm_beta); W(L->ssm_alpha); W(L->ssm_out);
    }
#undef W
    return n;
}

static bool packable(const th_kernels *k, const th_weight *w) {
    return w->ne1 % 8 == 0 && th_repack_supported(k, w->type, w->ne1 * TH_MAX(w->ne2, 1), w->ne0);
}

/* Expert e's own copy of w (docs/precision.md), when it can be packed. */
static const th_expert_slot *packable_slot(const th_kernels *k, const th_weight *w, int64_t e) {
    const th_expert_slot *x = th_weight_expert(w, e);
    return x && w->ne1 % 8 == 0 && th_repack_supported(k, x->type, w->ne1, w->ne0) ? x : NULL;
}

static uint64_t slot_bytes(const th_weight *w, const th_expert_slot *x) {
    return ((uint64_t)th_repack_row_bytes(x->type, x->row_bytes) * (uint64_t)w->ne1 + 63) & ~(uint64_t)63;
}

/* The packed copy is anonymous memory that decode streams once per token (GBs for F16
 * models): with 4 KiB pages every 4 KiB of weights is a TLB miss. thp (th_model_params.thp,
 * the CLI's --thp) makes a copy of
 * 2 MiB or more 2 MiB-aligned and asks for transparent huge pages (madvise; a no-op where
 * THP is off). Opt-in: on the development VM (THP "madvise", defrag "madvise") the kernel
 * compacted memory synchronously at the page faults, 8 s of system time and +19 s of
 * load for a 2 GiB copy, against +7-22 points of the read-bandwidth meter in decode. */
static void *packed_alloc(uint64_t total, bool thp) {
    const size_t huge = (size_t)2 << 20;
    if (total < huge || !thp) return aligned_alloc(64, (size_t)total);
    const size_t bytes = ((size_t)total + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

/* Once per model: copy the weights whose type has a packed gemm at this CPU level into
 * one allocation in the interleaved layout; the matmuls then read only the copy (the
 * mapped originals stay untouched, so resident memory does not double).
 * th_model_params.no_repack (--no-repack) turns it off (A/B measurements). */
th_status th_cpu_repack_model(th_model *m, const th_kernels *k) {
    if (m->repacked) return TH_OK;
    m->repacked = true;
    if (m->no_repack) return TH_OK;
    int cap = 4 + 32 * m->hp.n_layer, n;
    th_weight **ws = malloc((size_t)cap * sizeof *ws);
    if (!ws) return th_set_error(TH_ERR_NOMEM, "out of memory");
    n = matmul_weights(m, ws, cap);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!packable(k, ws[i])) continue;
        uint64_t bytes = (uint64_t)th_repack_row_bytes(ws[i]->type, ws[i]->row_bytes) * (uint64_t)ws[i]->ne1 *
                         (uint64_t)TH_MAX(ws[i]->ne2, 1);
        total += (bytes + 63) & ~(uint64_t)63;
    }
    for (int i = 0; i < n; i++)
        for (int64_t e = 0; ws[i]->experts && e < ws[i]->ne2; e++) {
            const th_expert_slot *x = packable_slot(k, ws[i], e);
            if (x) total += slot_bytes(ws[i], x);
        }
    if (total && !(m->packed_buf = packed_alloc(total, m->thp))) {
        free(ws);
        return th_set_error(TH_ERR_NOMEM, "out of memory for %llu bytes of repacked weights", (unsigned long long)total);
    }
    uint8_t *p = m->packed_buf;
    for (int i = 0; i < n && total; i++) {
        th_weight *w = ws[i];
        if (!packable(k, w)) continue;
        int64_t rows = w->ne1 * TH_MAX(w->ne2, 1);
        th_repack_rows(w->type, w->data, p, rows, w->row_bytes);
        w->packed = p;
        p += ((uint64_t)th_repack_row_bytes(w->type, w->row_bytes) * (uint64_t)rows + 63) & ~(uint64_t)63;
    }
    for (int i = 0; i < n && total; i++)   /* experts with a type of their own: their copies too */
        for (int64_t e = 0; ws[i]->experts && e < ws[i]->ne2; e++) {
            th_expert_slot *x = (th_expert_slot *)packable_slot(k, ws[i], e);
            if (!x) continue;
            th_repack_rows(x->type, x->data, p, ws[i]->ne1, x->row_bytes);
            x->packed = p;
            p += slot_bytes(ws[i], x);
        }
    free(ws);
    return TH_OK;
}

void *th_cpu_repack_copy(const th_kernels *k, uint32_t type, const void *data, int64_t ne0, int64_t ne1, int64_t n_mat,
                         size_t row_bytes) {
    if (ne1 % 8 != 0 || !th_repack_supported(k, type, ne1 * n_mat, ne0)) return NULL;
    uint64_t bytes = (uint64_t)th_repack_row_bytes(type, row_bytes) * (uint64_t)ne1 * (uint64_t)n_mat;
    void *p = aligned_alloc(64, (size_t)((bytes + 63) & ~(uint64_t)63));
    if (p) th_repack_rows(type, data, p, ne1 * n_mat, row_bytes);
    return p;
}
