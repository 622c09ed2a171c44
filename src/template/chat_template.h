/* chat_template.h — internal interface of the Jinja2-subset chat-template
 * interpreter. The public entry point, th_chat_render(), is in theseus.h. */
#ifndef TH_CHAT_TEMPLATE_H
#define TH_CHAT_TEMPLATE_H

#include "core/core.h"

#endif
