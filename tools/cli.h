/* cli.h — the theseus CLI: one file per subcommand (tools/cmd_*.c), each
 * exporting int cmd_NAME(int argc, char **argv) with argv[0] = "NAME".
 * The table of subcommands is in theseus.c. Tools use only theseus.h. */
#ifndef TH_CLI_H
#define TH_CLI_H

#include "theseus.h"
#include <stdbool.h>
#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_grammar(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_search(int argc, char **argv);

#define TH_MIN_SZ(a, b) ((size_t)(a) < (size_t)(b) ? (size_t)(a) : (size_t)(b))

/* Shared helpers (cli_util.c). */
/* Print "theseus NAME: <th_last_error()>" and return 1. */
int cli_fail(const char *cmd, th_status s);
/* Parse helpers: return false (after printing an error) on a bad value. */
bool cli_int(const char *cmd, const char *flag, const char *val, long lo, long hi, long *out);
bool cli_float(const char *cmd, const char *flag, const char *val, double *out);
/* Read a whole file / stdin into a malloc'd buffer (NUL-terminated; *len without it). */
char *cli_read_file(const char *path, size_t *len);
char *cli_read_stdin(size_t *len);

/* Options every command takes (theseus.c removes them from argv before the
 * command sees it): --no-mmap reads the model into memory instead of mapping it
 * (th_model_params.use_mmap = false), so a file changed or truncated on disk
 * while it is in use cannot hurt the process; --precision FILE --source SOURCE.gguf
 * (all commands but inspect) set th_model_params.precision_path / source_path:
 * load-time precision overrides (docs/precision.md); --type T (all but inspect,
 * quantize, convert) sets th_model_params.hf_type: a Hugging Face directory
 * quantized at load to T (docs/hf.md); --no-repack, --no-amx, --thp set
 * th_model_params.no_repack / no_amx / thp (the CPU weight layout). */
void cli_common_options(int *argc, char **argv);
/* --gpu-layers SPEC (or -ngl N, the same as --gpu-layers N) on run, chat, serve, bench,
 * logits and perplexity: th_context_params.gpu_layers (docs/hybrid.md, "Placement"),
 * or NULL. A spec that puts layers on the GPU where there is none (a build without
 * CUDA, no device) ends the process with a message naming the flag. */
const char *cli_gpu_layers(void);
/* th_model_default_params() with the common options applied. */
th_model_params cli_model_params(void);
/* th_tokenize into a malloc'd buffer sized from the tokenizer's answer (asks
 * again when the first guess is too small). */
th_status cli_tokenize(const th_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                       th_token **out, size_t *n);

/* Speculative decoding options shared by run, chat, bench and serve (cli_spec.c). */
typedef struct cli_spec {
    th_spec_params p;           /* kind NONE: no speculation */
    const char *draft_path;     /* --draft MODEL (loaded by cli_spec_open into p.draft) */
} cli_spec;
void cli_spec_usage(FILE *f);
/* One option a (value v, may be NULL): 0 = not a speculative option, 1 = taken
 * (no value), 2 = taken with its value, -1 = bad (message printed). */
int cli_spec_arg(const char *cmd, const char *a, const char *v, cli_spec *o);
/* Loads the draft model of --draft (TH_OK when there is none). */
th_status cli_spec_open(cli_spec *o, bool verbose);
void cli_spec_close(cli_spec *o);
/* "[speculative: N drafted, M accepted (x %), y tokens a verification step]" when N > 0. */
void cli_spec_print(FILE *f, int32_t drafted, int32_t accepted, int32_t generated, int32_t rounds);

/* bench's speculative rows (bench_spec.c). */
typedef struct bench_spec_opts {
    cli_spec *spec;
    const char *prompt_file;
    long n_gen, reps, threads;
    bool gpu, argmax_only, verbose;
    int w_model;
    const char *size, *params, *backend;
} bench_spec_opts;
th_status bench_spec(th_model *m, const bench_spec_opts *o);

/* bench's parallel-streams row, llama-batched-bench's method (bench_batched.c). */
typedef struct bench_batched_opts {
    long n_par, npp, ntg, reps, threads;
    bool gpu, argmax_only;
    int w_model;
    const char *size, *params, *backend;
} bench_batched_opts;
th_status bench_batched(th_model *m, const bench_batched_opts *o);

#endif
