/*
 * user_text.h -- what a user may write into a generated CUDA source (user_text.c): the checks of an
 * operator's fields and preamble and of a user kernel's source, before any of it reaches NVRTC.
 *
 * The text is untrusted: NVRTC runs in this process, reads files a directive names (#include
 * "/etc/passwd", whose lines then come back in its log), expands macros without bound, and a
 * directive or a stray brace lets a field end the function it sits in and define other kernels, or
 * redefine what the host reads of the image (#define sizeof(t) 4). So no field may hold a
 * preprocessor directive in any spelling (#, the digraph %:, _Pragma, a line continuation or a trigraph
 * that would make one), inline assembly, or a name the generated code uses (the gr_ prefix); an
 * expression holds no ';' (it stands where one expression does: a ',' can only declare more local
 * names); every text has its brackets balanced, and a bounded size. A kernel source may use #pragma unroll and #pragma nounroll, on lines
 * of their own. What passes can include no file and define no macro.
 */
#ifndef GR_USER_TEXT_H
#define GR_USER_TEXT_H

#include "gr.h"

/* The most bytes of each kind of text (docs/api.md says them). */
#define GR_EXPRESSION_MAX 4096      /* map, reduce, post, identity */
#define GR_DECLARATIONS_MAX 65536   /* a preamble, a kernel source */
#define GR_NAME_MAX 64              /* an acc struct's name, a kernel's entry point */

typedef enum gr_user_text {
    GR_TEXT_EXPRESSION,     /* one C expression (or an initializer: identity) */
    GR_TEXT_PREAMBLE,       /* C++ declarations, no directives */
    GR_TEXT_KERNEL          /* C++ declarations, #pragma unroll / nounroll lines allowed */
} gr_user_text;

/* GR_OK, or GR_EINVAL naming `field` with what is not accepted and where ("map: 2:1: ..."). */
gr_status gr_user_text_check(gr_context *ctx, const char *field, const char *text, gr_user_text kind);
/* GR_OK when name is a C name of at most GR_NAME_MAX characters that the generated code does not use
 * (no gr_ prefix), else GR_EINVAL naming `field`; what says what the name is for the message. */
gr_status gr_user_name_check(gr_context *ctx, const char *field, const char *name, const char *what);

#endif
