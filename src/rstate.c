/* rstate.c — the recurrent state's memory, snapshots, truncate and copy (rstate.h). */
#include "rstate.h"
#include <stdlib.h>
#include <string.h>

th_status th_rs_init(th_rstate *rs, int32_t n_rec, int64_t conv_n, int64_t ssm_n, int32_t n_seq, int32_t n_snap,
                     bool host_data) {
    memset(rs, 0, sizeof *rs);
    if (n_rec <= 0) return TH_OK;
    rs->n_rec = n_rec;
    rs->conv_n = conv_n;
    rs->ssm_n = ssm_n;
    rs->per_seq = (int64_t)n_rec * (conv_n + ssm_n);
    rs->n_seq = n_seq;
    rs->n_snap = n_snap;
    size_t cur = (size_t)n_seq * (size_t)rs->per_seq, snap = cur * (size_t)n_snap;
    if (rs->per_seq > ((int64_t)1 << 40) / 4 || cur > ((size_t)1 << 38) || snap > ((size_t)1 << 38))
        return th_set_error(TH_ERR_NOMEM, "recurrent state: %lld floats per sequence x %d sequences x %d snapshots is too large",
                            (long long)rs->per_seq, n_seq, n_snap);
    if (!host_data) cur = snap = 0;
    rs->cur = cur ? calloc(cur, sizeof(float)) : NULL;
    rs->snap = snap ? calloc(snap, sizeof(float)) : NULL;
    rs->snap_len = malloc(((size_t)n_seq * (size_t)n_snap + 1) * sizeof(int32_t));
    if ((cur && !rs->cur) || (snap && !rs->snap) || !rs->snap_len) {
        th_rs_free(rs);
        return th_set_error(TH_ERR_NOMEM, "out of memory for the recurrent state (%zu MiB)",
                            (cur + snap) * sizeof(float) >> 20);
    }
    for (size_t i = 0; i < (size_t)n_seq * (size_t)n_snap; i++) rs->snap_len[i] = -1;
    return TH_OK;
}

void th_rs_free(th_rstate *rs) {
    free(rs->cur);
    free(rs->snap);
    free(rs->snap_len);
    memset(rs, 0, sizeof *rs);
}

void th_rs_commit(th_rstate *rs, int32_t seq, int32_t old_len, int32_t new_len) {
    if (!rs->n_rec || !rs->n_snap) return;
    int32_t lo = old_len > new_len - rs->n_snap ? old_len : new_len - rs->n_snap;
    for (int32_t len = lo + 1; len <= new_len; len++) rs->snap_len[(size_t)seq * rs->n_snap + (size_t)(len % rs->n_snap)] = len;
}

th_status th_rs_truncate(th_rstate *rs, int32_t seq, int32_t cur_len, int32_t n_keep) {
    if (!rs->n_rec || n_keep >= cur_len) return TH_OK;
    float *cur = rs->cur ? rs->cur + (size_t)seq * (size_t)rs->per_seq : NULL;
    int32_t *tags = rs->snap_len + (size_t)seq * (size_t)rs->n_snap;
    if (n_keep <= 0) {
        if (rs->cur) memset(cur, 0, (size_t)rs->per_seq * sizeof(float));
        for (int32_t i = 0; i < rs->n_snap; i++) tags[i] = -1;
        return TH_OK;
    }
    int32_t slot = rs->n_snap ? n_keep % rs->n_snap : 0;
    if (!rs->n_snap || tags[slot] != n_keep)
        return th_set_error(TH_ERR_UNSUPPORTED, "sequence %d: the recurrent state at length %d is not kept (length %d; the context keeps "
                            "the state after each of the last %d positions: th_context_params.rs_snapshots)",
                            seq, n_keep, cur_len, rs->n_snap);
    if (rs->cur)
        memcpy(cur, rs->snap + ((size_t)seq * (size_t)rs->n_snap + (size_t)slot) * (size_t)rs->per_seq,
               (size_t)rs->per_seq * sizeof(float));
    for (int32_t i = 0; i < rs->n_snap; i++) if (tags[i] > n_keep) tags[i] = -1;
    return TH_OK;
}

void th_rs_copy(th_rstate *rs, int32_t dst, int32_t src) {
    if (!rs->n_rec || dst == src) return;
    size_t n = (size_t)rs->per_seq;
    if (rs->cur) memcpy(rs->cur + (size_t)dst * n, rs->cur + (size_t)src * n, n * sizeof(float));
    if (!rs->n_snap) return;
    if (rs->snap)
        memcpy(rs->snap + (size_t)dst * rs->n_snap * n, rs->snap + (size_t)src * rs->n_snap * n,
               (size_t)rs->n_snap * n * sizeof(float));
    memcpy(rs->snap_len + (size_t)dst * rs->n_snap, rs->snap_len + (size_t)src * rs->n_snap, (size_t)rs->n_snap * sizeof(int32_t));
}

size_t th_rs_bytes_per_seq(const th_rstate *rs) { return (size_t)rs->per_seq * sizeof(float); }
