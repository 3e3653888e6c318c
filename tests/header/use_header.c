/* use_header.c - the header check as C11 (see use_header.inc). */
#include "use_header.inc"
