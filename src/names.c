/*
 * names.c - which identifiers a user may give a parameter. A parameter's
 * name is a variable of the generated CUDA C++, so it must be a valid
 * identifier that NVRTC reads as an ordinary name and that nothing in the
 * kernel body needs: not a C++ keyword or alternative token, not a name the
 * C++ standard reserves, not NULL, not a CUDA built-in variable, not a
 * math function the generated code calls (a parameter `expf` would hide the
 * function in the kernel), and not the library's own prefix tl_, which the
 * generated code keeps for its identifiers.
 */
#include "names.h"

#include <ctype.h>
#include <string.h>

static const char *const cxx_keywords[] = {
    "alignas", "alignof", "asm", "auto", "bool", "break", "case", "catch", "char", "char8_t", "char16_t",
    "char32_t", "class", "concept", "const", "consteval", "constexpr", "constinit", "const_cast", "continue",
    "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else",
    "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int",
    "long", "mutable", "namespace", "new", "noexcept", "nullptr", "operator", "private", "protected", "public",
    "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static", "static_assert",
    "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef",
    "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", NULL};

/* The spellings C++ gives to operators (and_eq is &=, ...). */
static const char *const alternative_tokens[] = {"and",    "and_eq", "bitand", "bitor", "compl", "not",
                                                 "not_eq", "or",     "or_eq",  "xor",   "xor_eq", NULL};

/* Macros and built-ins NVRTC defines without any header. */
static const char *const predefined[] = {"NULL",     "offsetof", "threadIdx", "blockIdx", "blockDim",
                                         "gridDim",  "warpSize", "half",      NULL};

/* Functions the generated kernel bodies call by name. */
static const char *const math_functions[] = {
    "exp",  "expf",  "exp2", "exp2f", "log",   "logf",   "sqrt", "sqrtf", "rsqrt", "rsqrtf", "tanh",
    "tanhf", "erf",  "erff", "fabs",  "fabsf", "fmax",   "fmaxf", "fmin", "fminf", NULL};

static bool in_list(const char *const *list, const char *s)
{
    for (int i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

bool tli_valid_ident(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_') || strlen(s) > TLI_NAME_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return false;
    return true;
}

const char *tli_name_reserved(const char *s)
{
    if (strncmp(s, "tl_", 3) == 0)
        return "starts with tl_, which the generated code keeps for itself";
    if (strstr(s, "__") || (s[0] == '_' && isupper((unsigned char)s[1])))
        return "is reserved by C++ (it contains __ or starts with _ and a capital)";
    if (in_list(cxx_keywords, s))
        return "is a C++ keyword";
    if (in_list(alternative_tokens, s))
        return "is a C++ alternative token";
    if (in_list(predefined, s))
        return "is a macro or built-in of CUDA C++";
    if (in_list(math_functions, s))
        return "is a math function the generated code calls";
    return NULL;
}
