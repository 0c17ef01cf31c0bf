/*
 * ft_decl.h - the declarations a capture stream makes before its calls refer to them: fuser
 * instances (their basic-op lists) and recipe states. The vocabulary shared by the trace file
 * (schema/), the recorder, and the fuser model (tefuser/), which reads them without knowing any
 * trace file.
 */
#ifndef FT_DECL_H
#define FT_DECL_H

#include <stdint.h>

/* A declared fuser instance. ops_json is a canonical JSON array of {"type":..,"attrs":{..}}. */
typedef struct ft_fuser_def {
    int64_t id;           /* declared id (stream id) */
    const char *label;    /* NULL when absent */
    const char *ops_json; /* canonical JSON text (sorted keys, compact) */
    uint32_t n_ops;       /* basic ops in the list */
    int has_of;           /* this declaration continues an earlier fuser (capture "of") */
    int64_t of;           /* that fuser's stream id: the same OperationFuser instance, whose ops
                             changed attributes after a call; calls from here name this id */
} ft_fuser_def;

/* A declared recipe state: one (object identity, attribute values) pair. */
typedef struct ft_recipe_def {
    int64_t id;             /* declared id */
    const char *type;       /* recipe class name, e.g. "NVFP4BlockScaling" */
    int64_t obj;            /* identity of the Python object */
    const char *attrs_json; /* canonical JSON object text (sorted keys, compact) */
} ft_recipe_def;

#endif /* FT_DECL_H */
