/* names.h - the rules for names a user gives kernels and parameters. */
#ifndef TILEC_NAMES_H
#define TILEC_NAMES_H

#include <stdbool.h>

#define TLI_NAME_MAX 63

/* [A-Za-z_][A-Za-z0-9_]*, at most TLI_NAME_MAX characters; false for NULL. */
bool tli_valid_ident(const char *s);
/* Why a valid identifier cannot name a parameter ("is a C++ keyword", ...),
 * or NULL when it can. */
const char *tli_name_reserved(const char *s);

#endif
