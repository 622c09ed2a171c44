/* render.c — th_chat_render(): parses the context JSON, builds the global
 * scope (built-ins, the JSON object's keys, add_generation_prompt, bos_token,
 * eos_token), lexes, parses and runs the template inside one arena, and
 * turns any template error into TH_ERR_FORMAT with its message. */
#include "template/chat_template.h"
#include <cJSON.h>
#include <stdint.h>
#include <stdlib.h>

static th_status render(tctx *c, const char *tmpl, const char *json_text, cJSON *json, const th_chat_opts *opts,
                        char **out) {
    tframe *builtins = tt_frame_new(c, NULL);
    tt_install_globals(c, builtins);
    tframe *root = tt_frame_new(c, builtins);
    const char *numcur = json_text;
    for (cJSON *e = json->child; e; e = e->next)
        tt_frame_set(c, root, tt_strdup(c, e->string, strlen(e->string)), tv_from_json(c, e, &numcur));
    tt_frame_set(c, root, "add_generation_prompt", tv_bool(opts->add_generation_prompt));
    const char *bos = opts->bos_token ? opts->bos_token : "", *eos = opts->eos_token ? opts->eos_token : "";
    tt_frame_set(c, root, "bos_token", tv_strdup(c, bos, strlen(bos)));
    tt_frame_set(c, root, "eos_token", tv_strdup(c, eos, strlen(eos)));

    tt_lex(c, tmpl, strlen(tmpl), &c->toks);
    tnode *body = tt_parse(c, &c->toks);
    tbuf result = { 0 };
    c->out = &result;
    tt_exec(c, root, body);
    char *s = malloc(result.n + 1);
    if (!s) return th_set_error(TH_ERR_NOMEM, "chat template: out of memory for %zu bytes of output", result.n);
    if (result.n) memcpy(s, result.p, result.n);
    s[result.n] = 0;
    *out = s;
    return TH_OK;
}

typedef struct { const char *tmpl, *json_text; cJSON *json; const th_chat_opts *opts; char **out; } render_args;

/* The only function with setjmp: a template error longjmps back here. */
static th_status render_guarded(tctx *c, const render_args *a) {
    if (setjmp(c->jmp) != 0) {
        if (c->raised) return th_set_error(TH_ERR_FORMAT, "%s", c->err);
        if (!strncmp(c->err, "line ", 5) || c->line <= 0)
            return th_set_error(TH_ERR_FORMAT, "chat template: %s", c->err);
        return th_set_error(TH_ERR_FORMAT, "chat template: line %d: %s", c->line, c->err);
    }
    return render(c, a->tmpl, a->json_text, a->json, a->opts, a->out);
}

th_status th_chat_render(const char *tmpl, const char *context_json, const th_chat_opts *opts, char **out) {
    return th_chat_render_budget(tmpl, context_json, opts, NULL, out);
}

th_status th_chat_render_budget(const char *tmpl, const char *context_json, const th_chat_opts *opts,
                                th_mem_budget *budget, char **out) {
    if (!tmpl || !context_json || !out) return th_set_error(TH_ERR_ARG, "th_chat_render: NULL argument");
    *out = NULL;
    static const th_chat_opts dflt = { 0 };
    /* the parsed context is paid for too: at most a node (64 bytes + malloc's) per
     * two bytes of JSON, plus the strings */
    size_t len = strlen(context_json);
    size_t json_cost = len > (SIZE_MAX - (64u << 10)) / 48 ? SIZE_MAX : len * 48 + (64u << 10);
    if (budget && !th_mem_budget_take(budget, json_cost))
        return th_set_error(TH_ERR_CAPACITY, "memory budget exhausted: %zu of %zu MiB are in use by other requests",
                            th_mem_budget_used(budget) >> 20, th_mem_budget_limit(budget) >> 20);
    if (!budget) json_cost = 0;
    cJSON *json = cJSON_Parse(context_json);
    if (!json) {
        const char *at = cJSON_GetErrorPtr();
        th_mem_budget_give(budget, json_cost);
        return th_set_error(TH_ERR_FORMAT, "chat template context: invalid JSON near '%.30s'", at ? at : "");
    }
    if (!cJSON_IsObject(json)) {
        cJSON_Delete(json);
        th_mem_budget_give(budget, json_cost);
        return th_set_error(TH_ERR_FORMAT, "chat template context: JSON must be an object {\"messages\": [...]}");
    }
    tctx *c = calloc(1, sizeof *c);
    if (!c) {
        cJSON_Delete(json);
        th_mem_budget_give(budget, json_cost);
        return th_set_error(TH_ERR_NOMEM, "chat template: out of memory");
    }
    render_args a = { tmpl, context_json, json, opts ? opts : &dflt, out };
    c->budget = budget;
    c->max_output = a.opts->max_output ? a.opts->max_output : TT_DEFAULT_OUTPUT;
    /* the arena never frees, so it needs room for a few copies of the biggest string */
    c->mem_limit = c->max_output > TT_MAX_MEMORY / 8 ? (c->max_output > SIZE_MAX / 8 ? SIZE_MAX : c->max_output * 8)
                                                     : TT_MAX_MEMORY;
    th_status st = render_guarded(c, &a);
    if (st && c->budget_out) st = TH_ERR_CAPACITY;   /* the message stays */
    cJSON_Delete(json);
    th_mem_budget_give(budget, json_cost);
    tt_arena_free(c);
    free(c->toks.v);
    free(c);
    return st;
}
