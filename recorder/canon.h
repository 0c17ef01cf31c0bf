/*
 * canon.h - private: canonical JSON text (sorted keys, compact, doubles in their shortest form
 * that reads back to the same value), so that identical op lists and recipe attributes compare
 * equal as strings whatever the key order or spacing of the source.
 */
#ifndef FT_CANON_H
#define FT_CANON_H

#include "ft_common.h"

#include <stddef.h>
#include <stdint.h>

enum { FT_CANON_ANY = 0, FT_CANON_OBJECT = 1, FT_CANON_OPLIST = 2 };

/* Parse text and write its canonical form to *out (ft_malloc'd, NUL-terminated). kind checks the
 * shape: FT_CANON_OBJECT wants an object; FT_CANON_OPLIST an array of {"type": string, "attrs":
 * object (optional)} objects, whose length goes to *n_items. Bad text -> FT_EINVAL naming what
 * (prefixed with `what`). */
int ft_json_canon(const char *text, int kind, const char *what, char **out, size_t *n_items,
                  ft_err *err);

/* What the capture stream requires of a canonical op list beyond its shape: at least one op,
 * every type non-empty, every attrs.num_groups an integer in [1, INT32_MAX]. *groups gets the
 * num_groups the grouped ops share (the length every call's m_splits must have), 0 when there
 * is none or they differ. FT_EINVAL naming the op otherwise (FT_ENOMEM). */
int ft_oplist_groups(const char *ops_json, uint32_t *groups, ft_err *err);

/* The header's env and extra objects (canonical JSON text) are what the capture stream can
 * carry: env's values are strings, and extra names no field the header line defines (export
 * writes extra's fields into that line). FT_EINVAL naming the field otherwise. */
int ft_json_header_ok(const char *env_json, const char *extra_json, ft_err *err);

#endif /* FT_CANON_H */
