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
int cmd_bench(int argc, char **argv);

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

#endif
