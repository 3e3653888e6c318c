// use_header.cpp - the header check as C++ (see use_header.inc).
#include "use_header.inc"
