/* hf_load.c — quantize-on-load of a Hugging Face directory (th_model_params.hf_type):
 * the same two steps as `theseus convert DIR --type T` (th_hf_convert to a
 * float GGUF, th_quantize_file to T, in parallel threads) through a private
 * temporary directory, the result read into memory and the files removed, so
 * the weights equal those of convert --type T byte for byte. */
#include "hf/hf.h"
#include "theseus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One line, rewritten in place, while stderr is a terminal. */
static void progress(const th_quantize_progress *p, void *user) {
    (void)user;
    fprintf(stderr, "\rtheseus: quantizing at load: %d/%d %-40.40s %s -> %s\033[K", p->index, p->count, p->name,
            p->from_type, p->to_type);
    if (p->index == p->count) fputc('\n', stderr);
    fflush(stderr);
}

th_status hf_open_quantized(const char *path, const char *type, int32_t n_threads, gguf_file **out) {
    *out = NULL;
    if (!path || !type) return th_set_error(TH_ERR_ARG, "hf_open_quantized: NULL argument");
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char dir[4096], f_path[4200], q_path[4200];
    snprintf(dir, sizeof dir, "%s/theseus-hf-XXXXXX", tmp);
    if (!mkdtemp(dir)) return th_set_error(TH_ERR_IO, "%s: cannot make a temporary directory under %s for --type %s", path, tmp, type);
    snprintf(f_path, sizeof f_path, "%s/float.gguf", dir);
    snprintf(q_path, sizeof q_path, "%s/quant.gguf", dir);
    th_status s = th_hf_convert(path, f_path);
    if (!s) {
        th_quantize_params p = th_quantize_default_params();
        p.type = type;
        p.n_threads = n_threads;
        if (isatty(2)) p.progress = progress;
        s = th_quantize_file(f_path, q_path, &p);
    }
    if (!s) s = gguf_open_ex(q_path, false, out);   /* read into memory: the file goes away below */
    unlink(f_path);
    unlink(q_path);
    rmdir(dir);
    return s;
}
