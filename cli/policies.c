/*
 * policies.c - the policy options that replay, sql and diff share: `--policy LIST` (names, all,
 * and definitions NAME=SPEC, docs/policies.md) and `--policies FILE` (a JSON file of
 * definitions, repeatable). Both are read when the command runs, files first, so that a list can
 * name a policy a file defines; every definition joins the replayer's registry, where every
 * consumer (the reports, SQL's decisions table, diff, numerics) finds it by name.
 */
#include "cli.h"
#include "ft_replayer.h"

#include <stdio.h>
#include <string.h>

enum { FT_SPEC_NAME_MAX_CLI = 256 };

int cli_parse_policy_list(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    cli_policy_opts *p = field;
    if (!*v) return ft_err_set(err, FT_EINVAL, "wants a list of policies, got ''");
    if (p->list)
        return ft_err_set(err, FT_EINVAL,
                          "given twice: name every policy in one comma-separated list");
    p->list = v;
    return FT_OK;
}

int cli_parse_policy_file(const cli_opt *o, const char *v, void *field, ft_err *err)
{
    (void)o;
    cli_policy_opts *p = field;
    if (p->n_files == CLI_MAX_POLICY_FILES)
        return ft_err_set(err, FT_EINVAL, "more than %d files", CLI_MAX_POLICY_FILES);
    p->files[p->n_files++] = v;
    return FT_OK;
}

/* The whole of a policy file (at most 1 MiB: a policy is a line). */
static int read_file(const char *path, ft_buf *b, ft_err *err)
{
    int rc = cli_in_check(path, CLI_IN_STREAM, err);
    if (rc) return rc;
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return ft_err_set(err, FT_EINVAL, "cannot open %s", path);
    char chunk[4096];
    size_t n;
    while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b->len + n > (1u << 20))
            rc = ft_err_set(err, FT_EINVAL, "%s: larger than 1 MiB; not a policy file", path);
        else if (ft_buf_append(b, chunk, n))
            rc = ft_err_set(err, FT_ENOMEM, "out of memory");
    }
    if (!rc && ferror(f)) rc = ft_err_set(err, FT_EINVAL, "%s: read failed", path);
    if (f != stdin) fclose(f);
    return rc;
}

int cli_policies_resolve(const cli_policy_opts *p, int defs_only, uint32_t *idx, uint32_t *n,
                         ft_err *err)
{
    int rc = FT_OK;
    *n = 0;
    for (uint32_t k = 0; k < p->n_files && !rc; k++) {
        ft_buf b = {0};
        uint32_t got[FT_MAX_POLICIES], n_got;
        rc = read_file(p->files[k], &b, err);
        if (!rc)
            rc = ft_policy_define_json(b.data ? (const char *)b.data : "", b.len, p->files[k], got,
                                       &n_got, err);
        ft_buf_free(&b);
        if (rc && rc != FT_ENOMEM) {
            char detail[FT_ERR_MAX];
            ft_strlcpy(detail, ft_err_msg(err), sizeof detail);
            return cli_usage_error(err, "--policies: %s", detail);
        }
    }
    if (rc) return rc;
    if (defs_only) {
        /* every policy defined replays: the list only defines (or names) user policies */
        for (const char *s = p->list; s && *s;) {
            const char *end = strchr(s, ',');
            char item[1024];
            snprintf(item, sizeof item, "%.*s", end ? (int)(end - s) : (int)strlen(s), s);
            uint32_t k;
            if (strchr(item, '='))
                rc = ft_policy_define(item, &k, err);
            else if (!(rc = ft_policy_find(item, &k, err)) && k < ft_policy_builtin_count())
                rc = ft_err_set(err, FT_EINVAL,
                                "'%s': this command replays every policy; --policy here only "
                                "defines user policies (NAME=SPEC)",
                                item);
            if (rc) break;
            s = end ? end + 1 : NULL;
        }
    } else {
        rc = ft_policy_parse_list(p->list ? p->list : "all", idx, n, err);
        /* the files' policies replay too, after what the list names */
        for (uint32_t k = ft_policy_builtin_count(); !rc && k < ft_policy_count(); k++) {
            int in = 0;
            for (uint32_t j = 0; j < *n; j++)
                in |= idx[j] == k;
            if (in) continue;
            if (*n == FT_MAX_POLICIES)
                rc = ft_err_set(err, FT_ERANGE, "more than %d policies at once", FT_MAX_POLICIES);
            else
                idx[(*n)++] = k;
        }
    }
    if (rc && rc != FT_ENOMEM) {
        char detail[FT_ERR_MAX];
        ft_strlcpy(detail, ft_err_msg(err), sizeof detail);
        return cli_usage_error(err, "--policy: %s", detail);
    }
    return rc;
}

int cli_policies_names_builtin(const cli_policy_opts *p)
{
    for (const char *s = p->list; s && *s;) {
        const char *end = strchr(s, ',');
        const size_t len = end ? (size_t)(end - s) : strlen(s);
        char item[FT_SPEC_NAME_MAX_CLI];
        uint32_t k;
        if (len < sizeof item && !memchr(s, '=', len)) {
            memcpy(item, s, len);
            item[len] = '\0';
            if (!strcmp(item, "all") ||
                (!ft_policy_find(item, &k, NULL) && k < ft_policy_builtin_count()))
                return 1;
        }
        s = end ? end + 1 : NULL;
    }
    return 0;
}

void cli_policies_help(FILE *f)
{
    fprintf(f, "\npolicies (--policy NAME; each also as a spec, docs/policies.md):\n");
    for (uint32_t i = 0; i < ft_policy_builtin_count(); i++)
        fprintf(f, "  %-16s %s\n  %-16s   = %s\n", ft_policy_name(i), ft_policy_summary(i), "",
                ft_policy_spec(i));
    fprintf(f, "\nuser policies (--policy NAME=SPEC, --policies FILE.json):\n%s\n",
            ft_policy_vocabulary());
    char attrs[4096];
    ft_policy_attr_names(attrs, sizeof attrs, NULL);
    fprintf(f, "recipe attributes for attr:NAME: %s\n", attrs);
}
