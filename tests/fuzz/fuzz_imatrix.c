/* fuzz_imatrix.c — libFuzzer target for the imatrix.dat reader (src/eval/imatrix_file.c,
 * th_imatrix_parse). Properties (trap on failure): a failed parse leaves *out NULL
 * and sets a message; a parsed file's every entry is found by its name with at
 * least one finite value, and writing it out and parsing that again gives the same
 * entry count. */
#include "theseus.h"
#include <math.h>
#include <stdio.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    th_imatrix *im = (th_imatrix *)1;
    th_clear_error();
    if (th_imatrix_parse(data, size, "fuzz.dat", &im) != TH_OK) {
        if (im != NULL || !*th_last_error()) __builtin_trap();
        return 0;
    }
    int32_t n = th_imatrix_n_entries(im);
    for (int32_t i = 0; i < n; i++) {
        int64_t nv = 0;
        const float *v = th_imatrix_values(im, th_imatrix_entry_name(im, i), &nv, NULL);
        if (!v || nv < 1 || !isfinite(v[0])) __builtin_trap();
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_imatrix_%d.dat", (int)getpid());
    th_imatrix *back = NULL;
    if (th_imatrix_write(im, path, NULL) == TH_OK) {
        if (th_imatrix_load(path, &back) != TH_OK || th_imatrix_n_entries(back) != n) __builtin_trap();
        th_imatrix_free(back);
    }
    unlink(path);
    th_imatrix_free(im);
    return 0;
}
