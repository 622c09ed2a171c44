/* hf.h — Hugging Face model directories (config.json, *.safetensors,
 * tokenizer.json, tokenizer_config.json) presented as a GGUF: HF tensors under
 * llama.cpp's names and layout, HF config keys as llama.cpp's metadata keys, the
 * tokenizer as tokenizer.ggml.*. The model loader then runs unchanged on the
 * result; `theseus convert` writes the same GGUF to disk. */
#ifndef TH_HF_H
#define TH_HF_H

#include "gguf/gguf.h"

/* A directory, or a .safetensors file (config.json beside it). */
bool hf_is_model_path(const char *path);

typedef struct hf_conv hf_conv;
/* Read config, weights and tokenizer of path and lay out the GGUF (tensor data
 * is copied only when written). */
th_status hf_conv_open(const char *path, hf_conv **out);
th_status hf_conv_to_file(hf_conv *c, const char *out_path);
/* The GGUF in memory, parsed (the result owns its bytes). */
th_status hf_conv_to_gguf(hf_conv *c, gguf_file **out);
void hf_conv_free(hf_conv *c);
/* hf_conv_open + hf_conv_to_gguf: what th_model_load uses for a directory. */
th_status hf_open_as_gguf(const char *path, gguf_file **out);
/* hf_load.c: path converted and quantized to type exactly as `theseus convert
 * --type type` does (th_hf_convert + th_quantize_file through a temporary
 * directory under $TMPDIR or /tmp), the result read into memory. n_threads <= 0:
 * all cores; a progress line on stderr when it is a terminal. */
th_status hf_open_quantized(const char *path, const char *type, int32_t n_threads, gguf_file **out);
/* The llama.cpp architecture name chosen ("llama", "qwen2", ...). */
const char *hf_conv_arch(const hf_conv *c);

/* hf_tokenizer.c: tokenizer.json (+ tokenizer_config.json) of dir as
 * tokenizer.ggml.* keys in w (the writer copies keys as they are added).
 * n_vocab: the embedding rows (ids past the tokenizer's own are written as
 * unused tokens "[PAD<id>]", as llama.cpp's convert does). */
th_status hf_tok_write(const char *dir, int64_t n_vocab, gguf_writer *w);

#endif
