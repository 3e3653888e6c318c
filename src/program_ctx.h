/*
 * program_ctx.h - the one thing timing.c needs from program.c: the context a
 * program was compiled in. (Stands until src/program.h declares it; the two
 * declarations are identical, so both may coexist.)
 */
#ifndef TILEC_PROGRAM_CTX_H
#define TILEC_PROGRAM_CTX_H

#include "tilec.h"

/* The context p belongs to; NULL when p is NULL. */
tl_ctx *tli_program_ctx(const tl_program *p);

#endif
