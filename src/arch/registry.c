/* registry.c — the list of supported architectures. Adding one is one line. */
#include "arch/arch.h"
#include <string.h>

static const th_arch *const archs[] = {
    &th_arch_llama,
    &th_arch_qwen2,
    &th_arch_qwen3,
    &th_arch_qwen3moe,
    &th_arch_gemma2,
    &th_arch_gemma3,
    &th_arch_phi3,
    &th_arch_olmoe,
    &th_arch_deepseek2,
    &th_arch_gpt_oss,
    &th_arch_qwen35,
    &th_arch_qwen35moe,
    &th_arch_qwen3next,
    &th_arch_bitnet,
};

const th_arch *th_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

const char *th_arch_names(void) {
    static char buf[512];
    if (!buf[0]) {
        for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
            if (i) strncat(buf, ", ", sizeof buf - strlen(buf) - 1);
            strncat(buf, archs[i]->name, sizeof buf - strlen(buf) - 1);
        }
    }
    return buf;
}
