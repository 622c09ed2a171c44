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
int cmd_imatrix(int argc, char **argv);

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
 * while it is in use cannot hurt the process. */
void cli_common_options(int *argc, char **argv);
/* th_model_default_params() with the common options applied. */
th_model_params cli_model_params(void);
/* th_tokenize into a malloc'd buffer sized from the tokenizer's answer (asks
 * again when the first guess is too small). */
th_status cli_tokenize(const th_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                       th_token **out, size_t *n);

#endif
