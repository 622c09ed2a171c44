/* repack_model.c — the CPU backend's model-wide repacking: once per model, the
 * matmul weights whose type has a packed gemm at this CPU level are copied into
 * one allocation in the interleaved layout (cpu/repack.h) and hung off their
 * th_weight (w->packed). */
#include "cpu/forward.h"
#include "cpu/repack.h"
#include <stdlib.h>

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
    }
#undef W
    return n;
}

static bool packable(const th_kernels *k, const th_weight *w) {
    return w->ne1 % 8 == 0 && th_repack_supported(k, w->type, w->ne1 * TH_MAX(w->ne2, 1), w->ne0);
}

/* Once per model: copy the weights whose type has a packed gemm at this CPU level into
 * one allocation in the interleaved layout; the matmuls then read only the copy (the
 * mapped originals stay untouched, so resident memory does not double). TH_REPACK=0
 * turns it off (A/B measurements). */
th_status th_cpu_repack_model(th_model *m, const th_kernels *k) {
    if (m->repacked) return TH_OK;
    m->repacked = true;
    const char *env = getenv("TH_REPACK");
    if (env && !strcmp(env, "0")) return TH_OK;
    int cap = 4 + 24 * m->hp.n_layer, n;
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
    if (total && !(m->packed_buf = aligned_alloc(64, (size_t)total))) {
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
    free(ws);
    return TH_OK;
}
