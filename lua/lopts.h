/*
 * lopts.h -- the one parser of options tables (lopts.c): a table described by lgr_opt rows, each key
 * read into a field of a C struct, a misspelt key or a wrong value refused with what is accepted.
 */
#ifndef LGR_LOPTS_H
#define LGR_LOPTS_H

#include "lcompat.h"

#include <stddef.h>

/* One key of an options table: how to read its value (at the top of the stack) into the destination
 * struct at `offset`; min/max bound integers, names list the words of an enumeration. */
typedef struct lgr_opt {
    const char *key;
    void (*read)(lua_State *L, int arg, const struct lgr_opt *opt, void *field);
    size_t offset;
    lua_Integer min, max;
    const char *const *names;
} lgr_opt;

/* Reads opts (argument `arg`, nil or absent for none) into dst by the specs (ending with a NULL key);
 * a key that is not in the specs, a value of the wrong type or out of range raises, naming the key
 * and what is accepted. */
void lgr_parse_opts(lua_State *L, int arg, const lgr_opt *specs, void *dst);

void lgr_read_int(lua_State *L, int arg, const lgr_opt *opt, void *field);        /* int */
void lgr_read_size(lua_State *L, int arg, const lgr_opt *opt, void *field);       /* size_t */
void lgr_read_bool(lua_State *L, int arg, const lgr_opt *opt, void *field);       /* int 0/1 */
void lgr_read_dtype(lua_State *L, int arg, const lgr_opt *opt, void *field);      /* int, a gr_dtype */
void lgr_read_choice(lua_State *L, int arg, const lgr_opt *opt, void *field);     /* int, index in names */

#endif
