/* rstate.h — per-sequence recurrent state of the hybrid models' DeltaNet layers,
 * next to the KV cache (context.c owns one per context). For each sequence and
 * recurrent layer: the conv window (the last C-1 inputs of every conv channel,
 * oldest first) and the delta-rule state (Nv heads of Dk × Dk, row = key index).
 * Truncation needs the state at the kept length, which a recurrence cannot
 * recompute backwards, so the context keeps snapshots: the state after each of
 * the last n_snap positions of every sequence (a ring indexed by length mod
 * n_snap, tagged with the length it holds). Cost: n_snap × the state per
 * sequence (th_rs_bytes_per_seq), and one copy of a layer's state per snapshotted
 * token. Truncating to a length with no snapshot is TH_ERR_UNSUPPORTED. */
#ifndef TH_RSTATE_H
#define TH_RSTATE_H

#include "core/core.h"

typedef struct th_rstate {
    int32_t n_rec;          /* recurrent layers (0: none, nothing allocated) */
    int64_t conv_n, ssm_n;  /* floats per layer: conv window, delta-rule state */
    int64_t per_seq;        /* floats per sequence: n_rec · (conv_n + ssm_n) */
    int32_t n_seq, n_snap;
    float *cur;             /* [n_seq][per_seq], or NULL: the backend keeps the data (host_data false) */
    float *snap;            /* [n_seq][n_snap][per_seq], or NULL */
    int32_t *snap_len;      /* [n_seq][n_snap]: the length each snapshot holds, -1 none */
} th_rstate;

/* host_data false: only the sizes and the snapshot tags live here (a backend
 * keeps the state in its own memory, backend.h's rs_restore / rs_copy); truncate
 * and copy then do the bookkeeping only. */
th_status th_rs_init(th_rstate *rs, int32_t n_rec, int64_t conv_n, int64_t ssm_n, int32_t n_seq, int32_t n_snap,
                     bool host_data);
void th_rs_free(th_rstate *rs);
/* Layer slot r (0 .. n_rec-1) of sequence seq: its conv window, then its state. */
static inline float *th_rs_conv(th_rstate *rs, int32_t seq, int32_t r) {
    return rs->cur + (size_t)seq * (size_t)rs->per_seq + (size_t)r * (size_t)(rs->conv_n + rs->ssm_n);
}
static inline float *th_rs_ssm(th_rstate *rs, int32_t seq, int32_t r) { return th_rs_conv(rs, seq, r) + rs->conv_n; }
/* The snapshot slot that holds (or will hold) length len of seq, layer slot r. */
static inline float *th_rs_snap_conv(th_rstate *rs, int32_t seq, int32_t len, int32_t r) {
    return rs->snap + ((size_t)seq * (size_t)rs->n_snap + (size_t)(len % rs->n_snap)) * (size_t)rs->per_seq +
           (size_t)r * (size_t)(rs->conv_n + rs->ssm_n);
}
/* After a batch took seq from old_len to new_len: tag the snapshots its forward
 * pass wrote (lengths in (max(old_len, new_len - n_snap), new_len]). */
void th_rs_commit(th_rstate *rs, int32_t seq, int32_t old_len, int32_t new_len);
/* State of seq at length n_keep (cur_len: its length now): from a snapshot, zero
 * for 0, unchanged for cur_len; TH_ERR_UNSUPPORTED when no snapshot holds it. */
th_status th_rs_truncate(th_rstate *rs, int32_t seq, int32_t cur_len, int32_t n_keep);
void th_rs_copy(th_rstate *rs, int32_t dst, int32_t src);
size_t th_rs_bytes_per_seq(const th_rstate *rs);

#endif
