/*
 * source_text.h -- CUDA source written at run time for NVRTC (source_text.c): text that grows and counts
 * its lines, so that a user's text can be placed under a `#line 1 "<field>"` directive (NVRTC then
 * names the field in its errors) and the generated lines after it resumed at their true number. The
 * generated sources of user operators (operator_source.c) and of user kernels (kernel_source.c) are
 * written with it; the checks of what users write find words in C text with it.
 */
#ifndef GR_SOURCE_TEXT_H
#define GR_SOURCE_TEXT_H

#include "gr.h"

/* A failed allocation sticks: the writer checks `failed` once at the end. */
typedef struct gr_text {
    char *s;
    size_t len, cap;
    int line;           /* the number of the line being written, from 1 */
    int failed;
} gr_text;

void gr_text_raw(gr_text *t, const char *s, size_t n);
void gr_text_put(gr_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A user's text on lines of its own, numbered from 1 under the field's name, then the generated lines
 * numbered as they are in the whole source. */
void gr_text_field(gr_text *t, const char *field, const char *user);
/* What NVRTC lacks and the generated code and the user's text use: the fixed-width integer names
 * (int8_t ... uint64_t) and INFINITY and NAN. */
void gr_text_nvrtc_names(gr_text *t);
/* The C type NVRTC knows a dtype by (it has no <stdint.h>), from the dtype's size, sign and kind; NULL
 * for a size it has none for. */
const char *gr_device_type(gr_dtype t);

/* ---- words and tokens of C source text ---------------------------------------------------------- */

int gr_is_ident_char(int c);
/* A C identifier: a letter or '_', then letters, digits and '_'. */
int gr_is_identifier(const char *s);
/* Whether the C source text s has the identifier word as a token of its own: not part of a longer name
 * ("ix"), of a number, a string or character literal, or a comment. With free_only, a member after '.',
 * "->" or "::" (s.i, p->i, ns::i) does not count: that is another i. */
int gr_source_has_token(const char *s, const char *word, int free_only);
/* GR_OK when name is a word of at most 64 letters, digits and '_' that does not start with a digit (what
 * an operator or a user kernel is called), else a message naming "name". */
gr_status gr_check_name(gr_context *ctx, const char *name);

#endif
