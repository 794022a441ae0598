/*
 * compile_log.h -- NVRTC's log of a generated source, said in the user's terms (compile_log.c): its first
 * error as the error of the field that holds it, and only its lines about the generated source.
 *
 * A generated source (operator_source.c, kernel_source.c) puts each user's text after `#line 1
 * "<field>"`, so NVRTC names the field in its errors ("map(1): error: ..."); the rest is "generated".
 */
#ifndef GR_COMPILE_LOG_H
#define GR_COMPILE_LOG_H

#include "gr.h"

/* The log's entries -- "<file>(<line>): ..." and the lines after it, up to the next -- about the
 * generated source, a user's text or an embedded header; an entry about any other file is dropped,
 * with a line that says how many lines went. Takes log (malloc'd) and returns the log to keep. Nothing
 * a user writes can include a file (user_text.h): this keeps another file's lines out of messages
 * should one be read all the same. */
char *gr_compile_log_own(char *log);

/* The log's first error as the context's message: "<field>: <line>:<column>: <message> (<what>)" and
 * gr_errarg the field when a user's text holds it ("at its end" for an error on the generated line
 * right after a field), else "<what> does not compile: <file>: <line>: <message>". 0 when the log has
 * no error line. */
int gr_compile_error(gr_context *ctx, const char *what, const char *source, const char *log);

#endif
