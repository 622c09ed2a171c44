/* arch.h — architecture descriptors. One file per family (src/arch/<family>.c)
 * exports a th_arch; registry.c lists them (registering is one line). A
 * descriptor reads its hyper-parameters and weights into the model, using the
 * shared decoder loader (decoder.c) for everything a standard block has. */
#ifndef TH_ARCH_H
#define TH_ARCH_H

#include "model.h"

typedef struct th_arch {
    const char *name;                 /* general.architecture value */
    th_status (*load)(th_model *m);   /* fill m->hp and weights (m->file is set) */
    /* Appends "key=value" notes on distinctive options to buf (inspect). */
    void (*describe)(const th_model *m, char *buf, size_t cap);
} th_arch;

const th_arch *th_arch_find(const char *name);
/* "llama, qwen2, ..." */
const char *th_arch_names(void);

/* Options of the standard decoder block that a family turns on. */
typedef struct th_decoder_opts {
    int32_t rope_type;                /* TH_ROPE_NORM / TH_ROPE_NEOX */
    bool qkv_bias;                    /* require attn_{q,k,v}.bias */
    bool tied_output_ok;              /* output.weight may be absent (use token_embd) */
} th_decoder_opts;

/* Read the standard keys ("<arch>.block_count", ...) and tensors of a
 * llama-style decoder into m. */
th_status th_decoder_load(th_model *m, const th_decoder_opts *o);

extern const th_arch th_arch_llama;

#endif
