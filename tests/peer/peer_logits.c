/* peer_logits.c — a peer-side program (built against llama.cpp's or ik_llama.cpp's
 * libllama by tests/peer/make_ternary_goldens.sh, never part of theseus): the logits of
 * every position of a token list in one batch, written in the THLG format
 * (u32 magic 0x474C4854, u32 1, u32 n_tok, u32 n_vocab, i32 tokens[], f32 logits[][]).
 * CPU, n_ctx 512, flash attention off, K and V cache F32, 2 threads (so an F32 model is
 * F32 end to end, as the arch fixtures' goldens were computed); with ik_llama.cpp the V
 * cache is F16 (it refuses F32 without flash attention; the arch fixtures' README).
 *
 *   peer_logits MODEL.gguf 1,450,439,... OUT.logits
 * Build with -DIK_LLAMA for ik_llama.cpp (its vocabulary size call differs). */
#include "llama.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s MODEL.gguf TOKENS OUT.logits\n", argv[0]); return 2; }
    int32_t tok[512];
    int n = 0;
    for (char *p = argv[2]; *p && n < 512;) {
        tok[n++] = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.flash_attn = false;
    cp.type_k = GGML_TYPE_F32;
#ifdef IK_LLAMA
    cp.type_v = GGML_TYPE_F16;   /* ik_llama.cpp refuses an F32 V cache without flash attention */
#else
    cp.type_v = GGML_TYPE_F32;
#endif
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
#ifdef IK_LLAMA
    const int nv = llama_n_vocab(model);
#else
    const int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
#endif
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = tok[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
    FILE *f = fopen(argv[3], "wb");
    uint32_t h[4] = { 0x474C4854u, 1, (uint32_t)n, (uint32_t)nv };
    if (!f || fwrite(h, 4, 4, f) != 4 || fwrite(tok, 4, (size_t)n, f) != (size_t)n) return 1;
    for (int i = 0; i < n; i++)
        if (fwrite(llama_get_logits_ith(ctx, i), 4, (size_t)nv, f) != (size_t)nv) return 1;
    if (fclose(f)) return 1;
    llama_batch_free(b);
    llama_free(ctx);
#ifdef IK_LLAMA
    llama_free_model(model);
#else
    llama_model_free(model);
#endif
    printf("%s: %d tokens, %d logits each\n", argv[3], n, nv);
    return 0;
}
