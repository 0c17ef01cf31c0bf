/*
 * plan_driver.c - stdin/stdout front end to the fuser model for te_fusion_diff.py (a manual
 * cross-check against TE's own fusion functions; not part of the library or of ctest).
 *
 * Input: one case per line, four or five tab-separated fields: env JSON, recipe type ("None" for
 * no recipe), recipe attrs JSON, ops JSON, and optionally the rest of the header as JSON
 * ({"world_size": N, "rank": R, ...}: world_size and rank become the header's fields, every other
 * key one the format does not name, such as te_fusions). Output: the plan text of fuser 0 under
 * the recipe with f = 0, or "ERR <message>", one line per case. The line "NAMES" prints the
 * model's fusion rows instead, one "pass<TAB>full name" line each, then an empty line; a line
 * "VCMP<TAB>a<TAB>b" prints ft_version_cmp(a, b) as -1, 0 or 1, or "ERR" when either is no
 * version (for version_diff.py).
 */
#define _POSIX_C_SOURCE 200809L
#include "ft_tefuser.h"
#include "tefuser_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void names(void)
{
    static const char *const pass[] = {"forward_backward", "forward", "backward"};
    for (uint32_t i = 0; i < ft_n_rules; i++)
        printf("%s\t%s\n", pass[ft_rules[i].pass], ft_rules[i].te_name);
    printf("\n");
}

static void vcmp(char *pair)
{
    char *b = strchr(pair, '\t');
    int c = 0;
    if (b) *b++ = '\0';
    if (!b || ft_version_cmp_str(pair, b, &c))
        printf("ERR\n");
    else
        printf("%d\n", (c > 0) - (c < 0));
}

static void one_case(char *line)
{
    char *f[5] = {0};
    char *p = line;
    for (int i = 0; i < 5 && p; i++) {
        f[i] = p;
        p = strchr(p, '\t');
        if (p) *p++ = '\0';
    }
    if (!f[3]) {
        printf("ERR bad line\n");
        return;
    }
    ft_model_capture cap = {.env_json = f[0]};
    json_t *hdr = f[4] ? json_loads(f[4], 0, NULL) : NULL;
    char *extra = NULL;
    if (hdr) {
        json_t *ws = json_object_get(hdr, "world_size"), *rk = json_object_get(hdr, "rank");
        cap.has_world_size = json_is_integer(ws);
        cap.world_size = json_integer_value(ws);
        cap.has_rank = json_is_integer(rk);
        cap.rank = json_integer_value(rk);
        json_object_del(hdr, "world_size");
        json_object_del(hdr, "rank");
        extra = json_dumps(hdr, JSON_COMPACT | JSON_SORT_KEYS);
        cap.extra_json = extra;
    }
    json_t *a = json_loads(f[3], 0, NULL);
    uint32_t n_ops = a && json_is_array(a) ? (uint32_t)json_array_size(a) : 0;
    json_decref(a);
    ft_fuser_def fz = {1, NULL, f[3], n_ops, 0, 0};
    ft_recipe_def rd = {1, f[1], 1, f[2]};
    int has = strcmp(f[1], "None") != 0;
    ft_model *m = NULL;
    ft_err e = {0};
    uint32_t id = 0;
    if (ft_model_new(&fz, 1, has ? &rd : NULL, has ? 1 : 0, &cap, NULL, 0, &m, &e) ||
        ft_model_build(m, 0, has ? 0 : -1, 0, &id, &e))
        printf("ERR %s\n", ft_err_msg(&e));
    else
        printf("%s\n", ft_model_plan_text(m, id));
    ft_model_free(m);
    free(extra);
    json_decref(hdr);
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        if (line[n - 1] == '\n') line[n - 1] = '\0';
        if (!strcmp(line, "NAMES"))
            names();
        else if (!strncmp(line, "VCMP\t", 5))
            vcmp(line + 5);
        else
            one_case(line);
        fflush(stdout);
    }
    free(line);
    return 0;
}
