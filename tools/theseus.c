/* theseus.c — entry point of the theseus CLI: dispatches to a subcommand. */
#include "cli.h"
#include <string.h>

typedef struct { const char *name; int (*fn)(int, char **); const char *help; } command;

static const command commands[] = {
    { "run", cmd_run, "generate text from a prompt" },
    { "chat", cmd_chat, "chat with a model on stdin (each line is a user message)" },
    { "logits", cmd_logits, "write the logits of every prompt position (THLG format)" },
    { "tokenize", cmd_tokenize, "print the token ids of stdin" },
    { "inspect", cmd_inspect, "list a model file's metadata and tensors" },
    { "template", cmd_template, "render a chat template" },
    { "grammar", cmd_grammar, "check or print a GBNF grammar or JSON schema; match stdin against it" },
    { "quantize", cmd_quantize, "rewrite a GGUF with its weights in another type (Q4_K_M, Q8_0 ...)" },
    { "perplexity", cmd_perplexity, "perplexity of a text and KL divergence against a base (as llama-perplexity)" },
    { "imatrix", cmd_imatrix, "importance matrix of a model over a text (llama.cpp's imatrix.dat)" },
    { "bench", cmd_bench, "measure prompt and generation speed (llama-bench-style table)" },
    { "serve", cmd_serve, "OpenAI-compatible HTTP server with continuous batching" },
    { "convert", cmd_convert, "write a Hugging Face model directory as a GGUF (llama.cpp names and layout)" },
    { "search", cmd_search, "smallest per-tensor precision assignment within a KLD / PPL gate (BEST.precision)" },
};

static void usage(FILE *f) {
    fprintf(f, "theseus %s — LLM inference engine\n\nusage: theseus COMMAND [options]  (theseus COMMAND --help)\n"
               "  --no-mmap  (every command) read the model into memory instead of mapping it\n"
               "  --no-repack, --no-amx, --thp  (every command, CPU) keep the weights as stored (no packed copy);\n"
               "             no AMX for BF16; 2 MiB pages for the packed copy\n\ncommands:\n",
            THESEUS_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) { printf("theseus %s\n", THESEUS_VERSION); return 0; }
    cli_common_options(&argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "theseus: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
