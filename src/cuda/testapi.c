/* testapi.c — host-array entry points that run one CUDA kernel family on its own
 * (matrix products incl. the grouped expert GEMM, dequantization, attention, row
 * argmax, the MoE pair order) and the copy-bandwidth probe, for tests/test_cuda.c and bench/gpu/.
 * Not used by the forward pass. */
#include "cuda/kernels.h"
#include "core/core.h"
#include "quant/quant.h"
#include <cublas_v2.h>
#include <math.h>
#include <stdlib.h>

#define TRY(call) do { cudaError_t e_ = (call); if (e_) { err = cudaGetErrorString(e_); goto done; } } while (0)

/* Host GGUF rows to a device matrix, repacked to the SPLIT layout when the type
 * splits and force_gguf is false; *dw and *ds (scales or NULL) to cudaFree. */
static const char *upload_test_mat(uint32_t type, const void *w, int64_t rows, int64_t K, bool force_gguf,
                                   th_cu_mat *m, void **dw, void **ds) {
    const char *err = NULL;
    uint64_t rb;
    size_t qrow, srow;
    uint8_t *hq = NULL, *hs = NULL;
    *dw = *ds = NULL;
    if (!th_row_bytes(type, (uint64_t)K, &rb)) return "bad row length";
    *m = (th_cu_mat){ .type = type, .layout = TH_CU_GGUF, .rows = rows, .K = K, .row_bytes = (size_t)rb };
    if (!force_gguf && th_cu_split_sizes(type, K, &qrow, &srow)) {
        hq = malloc(qrow * (size_t)rows);
        hs = malloc(srow * (size_t)rows);
        if (!hq || !hs) { err = "out of memory"; goto done; }
        th_cu_repack_split(type, w, (size_t)rb, rows, K, hq, hs);
        TRY(cudaMalloc(dw, qrow * (size_t)rows));
        TRY(cudaMalloc(ds, srow * (size_t)rows));
        TRY(cudaMemcpy(*dw, hq, qrow * (size_t)rows, cudaMemcpyHostToDevice));
        TRY(cudaMemcpy(*ds, hs, srow * (size_t)rows, cudaMemcpyHostToDevice));
        m->layout = TH_CU_SPLIT;
        m->scales = *ds;
    } else {
        TRY(cudaMalloc(dw, (size_t)rb * (size_t)rows));
        TRY(cudaMemcpy(*dw, w, (size_t)rb * (size_t)rows, cudaMemcpyHostToDevice));
    }
    m->data = *dw;
done:
    free(hq);
    free(hs);
    return err;
}

/* The grouped expert GEMM of th_cu_test_matmul's paths 3 and 4 (backend.h) on
 * device x (n rows of K) into device y (n rows of w->rows). */
static const char *test_experts(cublasHandle_t h, const th_cu_mat *w, const float *dx, int n, float *dy, int path) {
    const char *err = NULL;
    int64_t K = w->K, rows = w->rows, X = path == 3 ? 1 : rows, rpe = rows / X;
    int nr = (int)(X * n);  /* segment rows: every expert's n tokens */
    int32_t *ex = malloc((size_t)X * 4), *off = malloc((size_t)X * 4), *cnt = malloc((size_t)X * 4);
    float *xs = NULL, *ys = NULL, *hs = malloc((size_t)nr * rpe * 4), *hy = malloc((size_t)n * rows * 4);
    void *wbuf = NULL, *xh = NULL;
    size_t wb = (size_t)(path == 3 ? 5 : 16) * (size_t)K * 2;  /* small tiles: several experts a tile, or several tiles an expert */
    if (!ex || !off || !cnt || !hs || !hy) { err = "out of memory"; goto done; }
    for (int64_t e = 0; e < X; e++) { ex[e] = (int32_t)e; off[e] = (int32_t)(e * n); cnt[e] = n; }
    TRY(cudaMalloc((void **)&xs, (size_t)nr * K * 4));
    TRY(cudaMalloc((void **)&ys, (size_t)nr * rpe * 4));
    TRY(cudaMalloc(&wbuf, wb));
    TRY(cudaMalloc(&xh, (size_t)nr * K * 2));
    for (int64_t e = 0; e < X; e++)
        TRY(cudaMemcpy(xs + e * n * K, dx, (size_t)n * K * 4, cudaMemcpyDeviceToDevice));
    TRY(cudaMemset(ys, 0xff, (size_t)nr * rpe * 4)); /* NaN poison */
    if (!th_cu_gemm_experts(h, w, rpe, (int)X, ex, off, cnt, nr, xs, K, ys, rpe, wbuf, wb, xh, 0)) {
        err = "cuBLAS grouped expert GEMM failed";
        goto done;
    }
    TRY(cudaGetLastError());
    TRY(cudaMemcpy(hs, ys, (size_t)nr * rpe * 4, cudaMemcpyDeviceToHost));
    for (int64_t e = 0; e < X; e++)  /* segment row e·n + t, column o: y[t][e·rpe + o] */
        for (int t = 0; t < n; t++)
            for (int64_t o = 0; o < rpe; o++) hy[t * rows + e * rpe + o] = hs[(e * n + t) * rpe + o];
    TRY(cudaMemcpy(dy, hy, (size_t)n * rows * 4, cudaMemcpyHostToDevice));
done:
    free(ex); free(off); free(cnt); free(hs); free(hy);
    cudaFree(xs); cudaFree(ys); cudaFree(wbuf); cudaFree(xh);
    return err;
}

/* y = W·x for n tokens by the GEMV (path 0), the GEMM (1), the MoE GEMV (2:
 * one expert holding every row, selected by all n pairs, pair p reading x[p])
 * or the grouped expert GEMM (3, 4: see backend.h), or the int8 MMA kernel (5,
 * mma_q8.cu) at any n. */
const char *th_cu_test_matmul(uint32_t type, const void *w, int64_t rows, int64_t K, const float *x, int n, float *y,
                              int path, bool force_gguf) {
    th_cu_mat m;
    void *dw = NULL, *ds = NULL, *wbuf = NULL, *xbuf = NULL;
    float *dx = NULL, *dy = NULL;
    int32_t *sel = NULL;
    th_cu_q8 q8 = { 0 };
    cublasHandle_t h = NULL;
    const char *err = upload_test_mat(type, w, rows, K, force_gguf, &m, &dw, &ds);
    if (err) goto done;
    TRY(cudaMalloc((void **)&dx, (size_t)n * K * 4));
    TRY(cudaMalloc((void **)&dy, (size_t)n * rows * 4));
    TRY(cudaMemcpy(dx, x, (size_t)n * K * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemset(dy, 0xff, (size_t)n * rows * 4)); /* NaN poison: every output must be written */
    if (path == 5 && (type == TH_F16 || type == TH_BF16)) {  /* the 16-bit MMA kernel */
        if (!th_cu_mma_f16(&m, dx, K, n, dy, rows, false, 0)) { err = "no 16-bit MMA kernel for this matrix or device"; goto done; }
    } else if (path == 5) {  /* the int8 MMA kernel, whatever the batch size */
        TRY(cudaMalloc((void **)&q8.q, (size_t)n * K));
        TRY(cudaMalloc((void **)&q8.d, (size_t)n * (K / 32) * 4));
        TRY(cudaMalloc((void **)&q8.s, (size_t)n * (K / 32) * 4));
        th_cu_quantize_q8(dx, K, n, K, &q8, 0);
        if (!th_cu_mma_q8(&m, &q8, n, dy, rows, false, 0)) { err = "no int8 MMA kernel for this type or device"; goto done; }
    } else if (path == 0 || path == 2) {
        bool q = th_cu_gemv_wants_q8(&m);
        if (q) {
            TRY(cudaMalloc((void **)&q8.q, (size_t)n * K));
            TRY(cudaMalloc((void **)&q8.d, (size_t)n * (K / 32) * 4));
            TRY(cudaMalloc((void **)&q8.s, (size_t)n * (K / 32) * 4));
            th_cu_quantize_q8(dx, K, n, K, &q8, 0);
        }
        if (path == 0) {
            th_cu_gemv(&m, dx, K, q ? &q8 : NULL, n, dy, rows, false, 0);
        } else {
            TRY(cudaMalloc((void **)&sel, (size_t)n * 4));
            TRY(cudaMemset(sel, 0, (size_t)n * 4));
            th_cu_moe_gemv(&m, NULL, NULL, NULL, rows, sel, n, NULL, 1, dx, K, q ? &q8 : NULL, dy, rows, 0);
        }
    } else if (path >= 3) {
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { err = "cublasCreate failed"; goto done; }
        if ((err = test_experts(h, &m, dx, n, dy, path))) goto done;
    } else {
        if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { err = "cublasCreate failed"; goto done; }
        size_t wb = (size_t)TH_MAX(K * 2, TH_MIN(rows, 1000) * K * 2); /* small tiles: exercise the chunk loop */
        TRY(cudaMalloc(&wbuf, wb));
        TRY(cudaMalloc(&xbuf, (size_t)n * K * 2));
        if (!th_cu_gemm(h, &m, dx, K, n, dy, rows, false, wbuf, wb, xbuf, 0)) { err = "cuBLAS GEMM failed"; goto done; }
    }
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(y, dy, (size_t)n * rows * 4, cudaMemcpyDeviceToHost));
done:
    if (h) cublasDestroy(h);
    cudaFree(dw); cudaFree(ds); cudaFree(dx); cudaFree(dy); cudaFree(q8.q); cudaFree(q8.d); cudaFree(q8.s);
    cudaFree(wbuf); cudaFree(xbuf); cudaFree(sel);
    return err;
}

/* Every row of W through th_cu_dequant_rows: to fp32 (the embedding lookup's
 * decoder; out holds floats) or, with f16, to fp16 (the GEMM path's tiles; out
 * holds halves) as two calls, row 0 alone and then rows 1.. from row0 = 1. */
const char *th_cu_test_dequant(uint32_t type, const void *w, int64_t rows, int64_t K, bool force_gguf, bool f16,
                               void *out) {
    th_cu_mat m;
    void *dw = NULL, *ds = NULL;
    void *dy = NULL;
    const size_t es = f16 ? 2 : 4;
    const char *err = upload_test_mat(type, w, rows, K, force_gguf, &m, &dw, &ds);
    if (err) goto done;
    TRY(cudaMalloc(&dy, (size_t)rows * K * es));
    TRY(cudaMemset(dy, 0xff, (size_t)rows * K * es));
    if (f16) {
        th_cu_dequant_rows(&m, NULL, 0, 1, dy, K, true, 1.0f, 0);
        th_cu_dequant_rows(&m, NULL, 1, rows - 1, (uint16_t *)dy + K, K, true, 1.0f, 0);
    } else {
        th_cu_dequant_rows(&m, NULL, 0, rows, dy, K, false, 1.0f, 0);
    }
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(out, dy, (size_t)rows * K * es, cudaMemcpyDeviceToHost));
done:
    cudaFree(dw); cudaFree(ds); cudaFree(dy);
    return err;
}

const char *th_cu_test_attention(int n_head, int n_kv, int hd, int hdv, int len, const float *q, const float *k,
                                 const float *v, int n, int pos0, int window, float softcap, const float *sinks,
                                 bool kv_f16, int block, int force_split, const int32_t *tok_pos,
                                 const int32_t *tok_seq, int n_seq, bool prompt, float *out) {
    const char *err = NULL;
    int nblk = (len + block - 1) / block;
    if (n_seq < 1) n_seq = 1;
    int64_t kd = (int64_t)n_kv * hd, vd = (int64_t)n_kv * hdv;
    size_t esz = kv_f16 ? 2 : 4, bb = (size_t)block * (size_t)(kd + vd) * esz;
    uint8_t *pool = calloc((size_t)nblk, bb);
    int32_t *table = malloc((size_t)n_seq * nblk * 4), *pos = malloc((size_t)n * 4), *seq = calloc((size_t)n, 4);
    void *dpool = NULL, *dtab = NULL, *dpos = NULL, *dseq = NULL;
    float *dq = NULL, *dout = NULL, *dpart = NULL, *dsink = NULL;
    if (!pool || !table || !pos || !seq) { err = "out of memory"; goto done; }
    /* blocks in reverse order: paging must be honoured; sequence s sees them rotated by s */
    for (int q = 0; q < n_seq; q++)
        for (int b = 0; b < nblk; b++) table[q * nblk + b] = (nblk - 1 - b + q) % nblk;
    for (int p = 0; p < len; p++) {
        uint8_t *base = pool + (size_t)table[p / block] * bb;
        int slot = p % block;
        for (int64_t i = 0; i < kd; i++) {
            float kv_ = k[(int64_t)p * kd + i];
            if (kv_f16) ((uint16_t *)base)[slot * kd + i] = th_f32_to_f16(kv_);
            else ((float *)base)[slot * kd + i] = kv_;
        }
        for (int64_t i = 0; i < vd; i++) {
            float vv = v[(int64_t)p * vd + i];
            if (kv_f16) ((uint16_t *)base)[block * kd + slot * vd + i] = th_f32_to_f16(vv);
            else ((float *)base)[block * kd + slot * vd + i] = vv;
        }
    }
    int32_t max_len = 1;
    for (int i = 0; i < n; i++) {
        pos[i] = tok_pos ? tok_pos[i] : pos0 + i;
        seq[i] = tok_seq ? tok_seq[i] : 0;
        if (pos[i] < 0 || pos[i] >= len || seq[i] < 0 || seq[i] >= n_seq) { err = "token outside the cache"; goto done; }
        max_len = TH_MAX(max_len, pos[i] + 1);
    }
    TRY(cudaMalloc(&dpool, (size_t)nblk * bb));
    TRY(cudaMalloc(&dtab, (size_t)n_seq * nblk * 4));
    TRY(cudaMalloc(&dpos, (size_t)n * 4));
    TRY(cudaMalloc(&dseq, (size_t)n * 4));
    TRY(cudaMalloc((void **)&dq, (size_t)n * n_head * hd * 4));
    TRY(cudaMalloc((void **)&dout, (size_t)n * n_head * hdv * 4));
    TRY(cudaMemcpy(dpool, pool, (size_t)nblk * bb, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(dtab, table, (size_t)n_seq * nblk * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(dpos, pos, (size_t)n * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(dseq, seq, (size_t)n * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemcpy(dq, q, (size_t)n * n_head * hd * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemset(dout, 0xff, (size_t)n * n_head * hdv * 4));
    if (sinks) {
        TRY(cudaMalloc((void **)&dsink, (size_t)n_head * 4));
        TRY(cudaMemcpy(dsink, sinks, (size_t)n_head * 4, cudaMemcpyHostToDevice));
    }
    th_cu_kv kv = { .pool = dpool, .f16 = kv_f16, .block_bytes = bb, .block = block, .k_dim = kd, .v_dim = vd,
                    .table = dtab, .max_blocks = nblk };
    th_cu_attn a = { .n_head = n_head, .n_head_kv = n_kv, .head_dim = hd, .head_dim_v = hdv,
                     .scale = 1.0f / sqrtf((float)hd), .softcap = softcap, .window = window, .sinks = dsink,
                     .host_seq = prompt ? seq : NULL,
                     .group_blocks = 1 };  /* blocks take as many query heads of a KV head as they can */
    size_t cap = (size_t)n * n_head * (size_t)((len + 31) / 32) * (size_t)(hdv + 2);
    TRY(cudaMalloc((void **)&dpart, cap * 4 + (size_t)n * n_head * 4));
    TRY(cudaMemset(dpart, 0, cap * 4 + (size_t)n * n_head * 4));
    a.partial = dpart;
    a.counter = (int32_t *)(dpart + cap);
    int sm = 132;
    cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0);
    if (force_split == 2) th_cu_attn_plan(n, n_head, hdv, len, cap, 4, 32, &a.n_split, &a.chunk);  /* graph plan */
    else if (force_split) th_cu_attn_plan(n, n_head, hdv, len, cap, 1 << 20, 32, &a.n_split, &a.chunk);
    else th_cu_attn_plan(n, n_head, hdv, max_len, cap, sm, 0, &a.n_split, &a.chunk);
    th_cu_attention(dq, (int64_t)n_head * hd, n, dpos, dseq, &a, &kv, 0, dout, (int64_t)n_head * hdv, NULL, 0);
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(out, dout, (size_t)n * n_head * hdv * 4, cudaMemcpyDeviceToHost));
done:
    cudaFree(dpool); cudaFree(dtab); cudaFree(dpos); cudaFree(dseq); cudaFree(dq); cudaFree(dout); cudaFree(dpart); cudaFree(dsink);
    free(pool); free(table); free(pos); free(seq);
    return err;
}

const char *th_cu_test_argmax(const float *x, int64_t n, int rows, int32_t *out) {
    const char *err = NULL;
    float *dx = NULL;
    int32_t *dout = NULL;
    TRY(cudaMalloc((void **)&dx, (size_t)rows * (size_t)n * 4));
    TRY(cudaMalloc((void **)&dout, (size_t)rows * 4));
    TRY(cudaMemcpy(dx, x, (size_t)rows * (size_t)n * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemset(dout, 0xff, (size_t)rows * 4)); /* -1: every row must be written */
    th_cu_argmax_rows(dx, n, n, rows, dout, 0);
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(out, dout, (size_t)rows * 4, cudaMemcpyDeviceToHost));
done:
    cudaFree(dx); cudaFree(dout);
    return err;
}

double th_cu_copy_bandwidth(size_t bytes) {
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double gbs = 0;
    if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes)) goto done;
    cudaMemset(a, 1, bytes);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = 0; i < 3; i++) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    const int reps = 20;
    cudaEventRecord(e0, 0);
    for (int i = 0; i < reps; i++) cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0);
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms > 0) gbs = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    cudaGetLastError();
    return gbs;
}

double th_cu_gemm_tflops(int n) {
    size_t e = (size_t)n * n;
    uint16_t *h = malloc(e * 2);
    void *a = NULL, *b = NULL, *c = NULL;
    cublasHandle_t hd = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double tf = 0;
    if (!h) return 0;
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < e; i++) { /* random fp16 in ±[0.25, 1) */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        h[i] = (uint16_t)((s & 0x83ff) | (((s >> 16) & 1 ? 13 : 14) << 10));
    }
    if (cudaMalloc(&a, e * 2) || cudaMalloc(&b, e * 2) || cudaMalloc(&c, e * 4)) goto done;
    cudaMemcpy(a, h, e * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(b, h, e * 2, cudaMemcpyHostToDevice);
    if (cublasCreate(&hd) != CUBLAS_STATUS_SUCCESS) goto done;
    const float one = 1.0f, zero = 0.0f;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < 13; r++) {
        if (r == 3) cudaEventRecord(e0, 0);
        cublasGemmEx(hd, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16F, n, b, CUDA_R_16F, n, &zero, c,
                     CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    cudaEventRecord(e1, 0);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms > 0) tf = 2.0 * n * (double)n * n * 10 / (ms * 1e-3) / 1e12;
done:
    if (hd) cublasDestroy(hd);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a); cudaFree(b); cudaFree(c);
    free(h);
    cudaGetLastError();
    return tf;
}

/* The kernel lab's timer (bench/gpu/bench_gpu.c `lab`): microseconds per product
 * of W (host GGUF rows, uploaded as the backend does) with n tokens, per n in
 * ns: us[5i + 0] the GEMV (q8 activations ready, 8 tokens a launch), 1 today's
 * GEMM path (fp16 activations, dequantized weight tiles, cuBLAS), 2 the int8
 * MMA kernel (q8 activations ready; F16/BF16: the 16-bit MMA kernel; -1 without
 * a kernel), 3 quantizing the activations to q8, 4 the int8 MMA kernel's
 * variant lab_variant (th_cu_mma_set_variant). Several copies of the matrix are cycled so that each call
 * reads its weights from DRAM, not L2. */
const char *th_cu_bench_matmul(uint32_t type, const void *w, int64_t rows, int64_t K, const int *ns, int n_ns,
                               int lab_variant, double *us) {
    enum { MAXC = 16 };
    th_cu_mat m[MAXC];
    void *dw[MAXC] = { 0 }, *ds[MAXC] = { 0 }, *wbuf = NULL, *xbuf = NULL;
    float *dx = NULL, *dy = NULL, *hx = NULL;
    th_cu_q8 q8 = { 0 };
    cublasHandle_t h = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    const char *err = NULL;
    int max_n = 1, nc = 0;
    for (int i = 0; i < n_ns; i++) max_n = TH_MAX(max_n, ns[i]);
    uint64_t rb;
    if (!th_row_bytes(type, (uint64_t)K, &rb)) return "bad row length";
    size_t bytes = (size_t)rb * (size_t)rows;
    int want = (int)TH_MIN((size_t)MAXC, ((size_t)192 << 20) / bytes + 1);
    for (nc = 0; nc < want; nc++)
        if ((err = upload_test_mat(type, w, rows, K, false, &m[nc], &dw[nc], &ds[nc]))) { nc++; goto done; }
    hx = malloc((size_t)max_n * K * 4);
    if (!hx) { err = "out of memory"; goto done; }
    uint32_t s = 12345;
    for (int64_t i = 0; i < (int64_t)max_n * K; i++) { s = s * 1664525u + 1013904223u; hx[i] = (float)(s >> 8) / 8388608.0f - 1.0f; }
    size_t wb = TH_MIN((size_t)rows * (size_t)K * 2, (size_t)256 << 20);
    TRY(cudaMalloc((void **)&dx, (size_t)max_n * K * 4));
    TRY(cudaMalloc((void **)&dy, (size_t)max_n * rows * 4));
    TRY(cudaMalloc((void **)&q8.q, (size_t)max_n * K));
    TRY(cudaMalloc((void **)&q8.d, (size_t)max_n * (K / 32) * 4));
    TRY(cudaMalloc((void **)&q8.s, (size_t)max_n * (K / 32) * 4));
    TRY(cudaMalloc(&wbuf, wb));
    TRY(cudaMalloc(&xbuf, (size_t)max_n * K * 2));
    TRY(cudaMemcpy(dx, hx, (size_t)max_n * K * 4, cudaMemcpyHostToDevice));
    TRY(cudaEventCreate(&e0));
    TRY(cudaEventCreate(&e1));
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) { err = "cublasCreate failed"; goto done; }
    th_cu_quantize_q8(dx, K, max_n, K, &q8, 0);
    for (int i = 0; i < n_ns; i++) {
        int n = ns[i];
        for (int p = 0; p < 5; p++) {
            const int iters = 20;
            us[5 * i + p] = -1;
            const bool f16 = th_cu_mma_f16_supports(&m[0], K);
            if ((p == 2 && !f16 && !th_cu_mma_q8_supports(&m[0])) || (p == 4 && !th_cu_mma_q8_supports(&m[0]))) continue;
            if (p == 4 && (lab_variant & 128) && (n > TH_CU_MMA_NARROW_MAX || !th_cu_mma_q8n_supports(&m[0]))) continue;
            th_cu_mma_set_variant(p == 4 ? lab_variant : 0);
            for (int it = -2; it < iters; it++) {
                if (it == 0) TRY(cudaEventRecord(e0, 0));
                const th_cu_mat *mm = &m[(it + 2) % nc];
                if (p == 0) th_cu_gemv(mm, dx, K, th_cu_gemv_wants_q8(mm) ? &q8 : NULL, n, dy, rows, false, 0);
                else if (p == 1) th_cu_gemm(h, mm, dx, K, n, dy, rows, false, wbuf, wb, xbuf, 0);
                else if (p == 2 && f16) th_cu_mma_f16(mm, dx, K, n, dy, rows, false, 0);
                else if (p == 2 || p == 4) th_cu_mma_q8(mm, &q8, n, dy, rows, false, 0);
                else th_cu_quantize_q8(dx, K, n, K, &q8, 0);
            }
            TRY(cudaEventRecord(e1, 0));
            TRY(cudaEventSynchronize(e1));
            TRY(cudaGetLastError());
            float ms = 0;
            TRY(cudaEventElapsedTime(&ms, e0, e1));
            us[5 * i + p] = 1000.0 * ms / iters;
            th_cu_mma_set_variant(0);
        }
    }
done:
    if (h) cublasDestroy(h);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    for (int c = 0; c < nc; c++) { cudaFree(dw[c]); cudaFree(ds[c]); }
    cudaFree(dx); cudaFree(dy); cudaFree(q8.q); cudaFree(q8.d); cudaFree(q8.s); cudaFree(wbuf); cudaFree(xbuf);
    free(hx);
    return err;
}

/* th_cu_moe_order on host expert ids (n_pairs of them, each in [0, n_expert)): the
 * pairs grouped by expert into order (n_pairs ints) and the segments into seg. */
const char *th_cu_test_moe_order(const int32_t *sel, int n_pairs, int n_expert, int32_t *order, int32_t *seg) {
    const char *err = NULL;
    int n_slots = n_pairs < n_expert ? n_pairs : n_expert;
    size_t seg_n = 1 + 3 * (size_t)n_slots;
    int32_t *ds = NULL, *dord = NULL, *dseg = NULL;
    TRY(cudaMalloc((void **)&ds, (size_t)n_pairs * 4));
    TRY(cudaMalloc((void **)&dord, (size_t)n_pairs * 4));
    TRY(cudaMalloc((void **)&dseg, seg_n * 4));
    TRY(cudaMemcpy(ds, sel, (size_t)n_pairs * 4, cudaMemcpyHostToDevice));
    TRY(cudaMemset(dord, 0xff, (size_t)n_pairs * 4));  /* -1 poison: every place must be written */
    TRY(cudaMemset(dseg, 0xff, seg_n * 4));
    th_cu_moe_walk w = { .order = dord, .seg = dseg, .n_slots = n_slots };
    th_cu_moe_order(ds, n_pairs, n_expert, &w, 0);
    TRY(cudaGetLastError());
    TRY(cudaDeviceSynchronize());
    TRY(cudaMemcpy(order, dord, (size_t)n_pairs * 4, cudaMemcpyDeviceToHost));
    TRY(cudaMemcpy(seg, dseg, seg_n * 4, cudaMemcpyDeviceToHost));
done:
    cudaFree(ds); cudaFree(dord); cudaFree(dseg);
    return err;
}
