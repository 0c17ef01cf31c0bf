/*
 * plan_driver.c - stdin/stdout front end to the fuser model for te_fusion_diff.py (a manual
 * cross-check against TE's own fusion functions; not part of the library or of ctest).
 *
 * Input: one case per line, four tab-separated fields: env JSON, recipe type ("None" for no
 * recipe), recipe attrs JSON, ops JSON. Output: the plan text of fuser 0 under the recipe with
 * f = 0, or "ERR <message>", one line per case.
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_tefuser.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void one_case(char *line)
{
    char *f[4];
    char *p = line;
    for (int i = 0; i < 4; i++) {
        f[i] = p;
        p = strchr(p, '\t');
        if (p)
            *p++ = '\0';
        else if (i < 3) {
            printf("ERR bad line\n");
            return;
        }
    }
    json_t *a = json_loads(f[3], 0, NULL);
    uint32_t n_ops = a && json_is_array(a) ? (uint32_t)json_array_size(a) : 0;
    json_decref(a);
    ft_fuser_def fz = {1, NULL, f[3], n_ops};
    ft_recipe_def rd = {1, f[1], 1, f[2]};
    int has = strcmp(f[1], "None") != 0;
    ft_model *m = NULL;
    ft_err e = {0};
    if (ft_model_new(&fz, 1, has ? &rd : NULL, has ? 1 : 0, &(ft_model_capture){.env_json = f[0]},
                     NULL, 0, &m, &e)) {
        printf("ERR %s\n", ft_err_msg(&e));
        return;
    }
    uint32_t id = 0;
    if (ft_model_build(m, 0, has ? 0 : -1, 0, &id, &e))
        printf("ERR %s\n", ft_err_msg(&e));
    else
        printf("%s\n", ft_model_plan_text(m, id));
    ft_model_free(m);
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (line[n - 1] == '\n') line[n - 1] = '\0';
        one_case(line);
    }
    free(line);
    return 0;
}
