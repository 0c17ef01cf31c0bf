/*
 * transient.c - what the reports say of transient fusers: the instances that share a label and an
 * op list with others of their trace (TE's OperationFuser([op]), made anew for every call of a
 * standalone te.ops module), grouped by label ("model.norm x 250,000"), for the text report, the
 * JSON document and the HTML report, and the recommendation's sentence when most builds come from
 * them: no per-fuser cache key can save a build of a fuser that is called once; what the
 * shared-oplist what-if would build instead.
 */
#include "report_int.h"

#include <stdio.h>
#include <string.h>

static const char definition[] =
    "fusers that share a label and an op list with another fuser of their trace: TE makes a new "
    "OperationFuser([op]) for every call of a standalone te.ops module, whose plan cache lives "
    "for that call only";

/* The slot of the shared-oplist policy, -1 when it was not replayed. */
static int shared_slot(const ft_replay_result *r)
{
    for (uint32_t p = 0; p < r->n_policies; p++)
        if (!strcmp(ft_policy_name(r->pol[p].policy), "shared-oplist")) return (int)p;
    return -1;
}

static const char *label_or(const ft_transient_group *g)
{
    return g->label[0] ? g->label : "(no label)";
}

/* "model.norm x 250000, model.proj x 250000 and 3 more labels" */
static void labels_line(FILE *f, const ft_replay_result *r, uint32_t at_most)
{
    const uint32_t n = r->n_transient < at_most ? r->n_transient : at_most;
    for (uint32_t g = 0; g < n; g++)
        fprintf(f, "%s%s x %llu",
                g ? (g + 1 == n && n == r->transient_groups ? " and " : ", ") : "",
                label_or(&r->transient[g]), (unsigned long long)r->transient[g].fusers);
    if (r->transient_groups > n)
        fprintf(f, " and %llu more label%s", (unsigned long long)(r->transient_groups - n),
                r->transient_groups - n == 1 ? "" : "s");
}

void report_transient_text(FILE *f, const ft_replay_result *r)
{
    if (!r->transient_groups) return;
    const int sh = shared_slot(r);
    fprintf(f, "\ntransient fusers: %llu instances under %llu label%s, %llu calls (%s)\n",
            (unsigned long long)r->transient_fusers, (unsigned long long)r->transient_groups,
            r->transient_groups == 1 ? "" : "s", (unsigned long long)r->transient_calls,
            definition);
    fprintf(f, "  %-40s %12s %12s", "label x instances", "calls", "builds");
    fprintf(f, "  (per policy: %s", ft_policy_name(r->pol[0].policy));
    for (uint32_t p = 1; p < r->n_policies; p++)
        fprintf(f, " / %s", ft_policy_name(r->pol[p].policy));
    fprintf(f, ")\n");
    for (uint32_t g = 0; g < r->n_transient; g++) {
        const ft_transient_group *t = &r->transient[g];
        char name[160];
        snprintf(name, sizeof name, "%s x %llu", label_or(t), (unsigned long long)t->fusers);
        fprintf(f, "  %-40s %12llu ", name, (unsigned long long)t->calls);
        for (uint32_t p = 0; p < r->n_policies; p++)
            fprintf(f, "%s%llu", p ? " / " : "", (unsigned long long)t->builds[p]);
        fputc('\n', f);
    }
    if (r->transient_groups > r->n_transient)
        fprintf(f, "  and %llu more labels\n",
                (unsigned long long)(r->transient_groups - r->n_transient));
    if (sh >= 0) {
        const ft_policy_result *q = &r->pol[sh];
        fprintf(f,
                "  shared-oplist (what-if: plans kept across fusers by op-list signature) builds "
                "%llu of their plans, %llu stale calls in all.\n",
                (unsigned long long)q->transient_builds,
                (unsigned long long)(q->calls - q->stale[FT_STALE_NONE]));
    }
}

json_t *report_transient_json(const ft_replay_result *r)
{
    json_t *o = json_object(), *by = json_array();
    json_object_set_new(o, "definition", json_string(definition));
    json_object_set_new(o, "fusers", json_integer((json_int_t)r->transient_fusers));
    json_object_set_new(o, "calls", json_integer((json_int_t)r->transient_calls));
    json_object_set_new(o, "labels", json_integer((json_int_t)r->transient_groups));
    for (uint32_t g = 0; g < r->n_transient; g++) {
        const ft_transient_group *t = &r->transient[g];
        json_t *x = json_object(), *b = json_object();
        json_object_set_new(x, "label", json_string(t->label));
        json_object_set_new(x, "fusers", json_integer((json_int_t)t->fusers));
        json_object_set_new(x, "calls", json_integer((json_int_t)t->calls));
        for (uint32_t p = 0; p < r->n_policies; p++)
            json_object_set_new(b, ft_policy_name(r->pol[p].policy),
                                json_integer((json_int_t)t->builds[p]));
        json_object_set_new(x, "builds", b);
        json_array_append_new(by, x);
    }
    json_object_set_new(o, "by_label", by);
    return o;
}

void report_transient_recommend(FILE *f, const ft_replay_result *r, const ft_policy_result *ref)
{
    if (!ref || !r->transient_groups || 2 * ref->transient_builds <= ref->builds) return;
    fprintf(f, "- Most of %s's builds (%llu of %llu) come from transient fusers (",
            ft_policy_name(ref->policy), (unsigned long long)ref->transient_builds,
            (unsigned long long)ref->builds);
    labels_line(f, r, 3);
    fprintf(f, "): TE makes a new OperationFuser([op]) for every call of a standalone op, so no "
               "per-fuser cache key can save a build of theirs");
    const int sh = shared_slot(r);
    if (sh >= 0) {
        const ft_policy_result *q = &r->pol[sh];
        const uint64_t stale = q->calls - q->stale[FT_STALE_NONE];
        fprintf(f,
                "; kept across fusers by op-list signature (shared-oplist, a what-if) they would "
                "take %llu builds instead of %llu, %s",
                (unsigned long long)q->transient_builds, (unsigned long long)ref->transient_builds,
                stale ? "but with stale plans" : "with no stale plan");
        if (stale) fprintf(f, " on %llu calls", (unsigned long long)stale);
    }
    fprintf(f, ".\n");
}

json_t *report_transient_recommend_json(const ft_replay_result *r, const ft_policy_result *ref)
{
    if (!ref || !r->transient_groups || 2 * ref->transient_builds <= ref->builds) return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "policy", json_string(ft_policy_name(ref->policy)));
    json_object_set_new(o, "builds", json_integer((json_int_t)ref->transient_builds));
    json_object_set_new(o, "of_builds", json_integer((json_int_t)ref->builds));
    json_object_set_new(o, "why",
                        json_string("TE makes a new OperationFuser([op]) for every call "
                                    "of a standalone op, so no per-fuser cache key can "
                                    "save a build of theirs"));
    const int sh = shared_slot(r);
    if (sh >= 0) {
        const ft_policy_result *q = &r->pol[sh];
        json_object_set_new(o, "shared_oplist_builds",
                            json_integer((json_int_t)q->transient_builds));
        json_object_set_new(o, "shared_oplist_stale_calls",
                            json_integer((json_int_t)(q->calls - q->stale[FT_STALE_NONE])));
    }
    return o;
}

void report_transient_html(FILE *f, const ft_replay_result *r, void (*esc)(FILE *, const char *))
{
    if (!r->transient_groups) return;
    fprintf(f, "<h3>Transient fusers</h3>\n<p>%llu instances under %llu label%s, %llu calls: ",
            (unsigned long long)r->transient_fusers, (unsigned long long)r->transient_groups,
            r->transient_groups == 1 ? "" : "s", (unsigned long long)r->transient_calls);
    esc(f, definition);
    fputs(".</p>\n<table><tr><th>label</th><th>instances</th><th>calls</th>", f);
    for (uint32_t p = 0; p < r->n_policies; p++) {
        fputs("<th>builds: ", f);
        esc(f, ft_policy_name(r->pol[p].policy));
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (uint32_t g = 0; g < r->n_transient; g++) {
        const ft_transient_group *t = &r->transient[g];
        fputs("<tr><td>", f);
        esc(f, label_or(t));
        fprintf(f, "</td><td>%llu</td><td>%llu</td>", (unsigned long long)t->fusers,
                (unsigned long long)t->calls);
        for (uint32_t p = 0; p < r->n_policies; p++)
            fprintf(f, "<td>%llu</td>", (unsigned long long)t->builds[p]);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
    if (r->transient_groups > r->n_transient)
        fprintf(f, "<p>and %llu more labels</p>\n",
                (unsigned long long)(r->transient_groups - r->n_transient));
}
