/* place.h — mixed placement: some layers of a model on one backend (the CPU), the
 * rest on another (the GPU), as one context (docs/hybrid.md, "Placement"). The
 * placement backend (th_backend_place) forwards each op of the block to the backend
 * of the layer it belongs to, hands the residual stream X over (get_x / put_x)
 * where two consecutive layers live on different backends, runs the embedding on
 * the backend of layer 0 and the output head on the backend of the last layer.
 * Each backend keeps its own scratch, weight copies (only its layers' on a GPU) and
 * the KV of its own attention layers; the recurrent state stays in th_rstate. */
#ifndef TH_PLACE_H
#define TH_PLACE_H

#include "backend.h"

/* The two devices of a placement: index 0 the CPU, 1 the GPU. */
enum { TH_DEV_CPU = 0, TH_DEV_GPU = 1 };

/* Parses th_context_params.gpu_layers for a model of n_layer layers into dev[n_layer]
 * (TH_DEV_CPU / TH_DEV_GPU):
 *   "N"                  the last N layers on the GPU (0: none; N >= n_layer: all)
 *   "A-B:DEV,C:DEV,..."  inclusive ranges or single layers, DEV "cpu" or "gpu"; each
 *                        layer named at most once; layers not named run on the CPU.
 * TH_ERR_ARG naming the spec and the offending part for anything else. */
th_status th_parse_gpu_layers(const char *spec, int32_t n_layer, int8_t *dev);

extern const th_backend th_backend_place;

/* context.c: a context whose layers run on devs[dev[il]] (dev: n_layer entries of 0/1,
 * copied); devs NULL: {CPU, CUDA}. Tests pass two CPU backends to check the hand-over
 * without a GPU. Every layer on one device makes a plain context of that backend. */
th_status th_context_new_placed(th_model *m, const th_context_params *params, const int8_t *dev,
                                const th_backend *const devs[2], th_context **out);

#endif
