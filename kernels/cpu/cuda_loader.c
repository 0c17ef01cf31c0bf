/*
 * cuda_loader.c - the ft_cuda_* entry points of ft_kernels.h, forwarded to the CUDA back end,
 * which is a plugin (libfusertrace_cuda.so, kernels/cuda/) loaded with dlopen when one is first
 * called: so nothing that links ft_kernels needs libcudart unless the GPU is used. The plugin is
 * looked up, in order: $FT_CUDA_PLUGIN; beside the executable (DIR, DIR/lib, DIR/../lib, and
 * DIR/../kernels for the build tree's cli/ and tests/); the build tree and the install's library
 * directory as configured; then the dynamic loader's own search (LD_LIBRARY_PATH). Without it
 * (or in a build without CUDA) every entry point reports FT_ENODEV and says why;
 * ft_cuda_device_count is 0.
 */
#define _GNU_SOURCE
#include "ft_kernels.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLUGIN "libfusertrace_cuda.so"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_plugin;
static char g_why[768];

#ifdef FT_CUDA_PLUGIN_BUILT
static int try_open(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        g_plugin = h;
        return 1;
    }
    const char *e = dlerror();
    /* keep the first failure that is not a plain "no such file" */
    if (!g_why[0] || (e && !strstr(e, "No such file")))
        ft_strlcpy(g_why, e ? e : path, sizeof g_why);
    return 0;
}
#endif

static void load(void)
{
#ifndef FT_CUDA_PLUGIN_BUILT
    snprintf(g_why, sizeof g_why, "fusertrace was built without CUDA (nvcc not found)");
#else
    const char *env = getenv("FT_CUDA_PLUGIN");
    if (env && *env && try_open(env)) return;
    char exe[1024], path[1200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *rel[] = {"", "/lib", "/../lib", "/../kernels"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            if (snprintf(path, sizeof path, "%s%s/" PLUGIN, exe, rel[i]) >= (int)sizeof path)
                continue;
            if (access(path, F_OK) == 0 && try_open(path)) return;
        }
    }
    const char *dirs[] = {FT_CUDA_PLUGIN_BUILD_DIR, FT_CUDA_PLUGIN_INSTALL_DIR};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (snprintf(path, sizeof path, "%s/" PLUGIN, dirs[i]) >= (int)sizeof path) continue;
        if (access(path, F_OK) == 0 && try_open(path)) return;
    }
    if (try_open(PLUGIN)) return;
    char why[384];
    ft_strlcpy(why, g_why, sizeof why);
    int w = snprintf(g_why, sizeof g_why,
                     "the CUDA back end " PLUGIN " was not found or did not load (%s); looked in "
                     "$FT_CUDA_PLUGIN, beside the executable, " FT_CUDA_PLUGIN_BUILD_DIR
                     ", " FT_CUDA_PLUGIN_INSTALL_DIR " and the loader's path",
                     why);
    (void)w; /* a long message is cut, which is fine */
#endif
}

/* The plugin's function name, or NULL with err set (FT_ENODEV). */
static void *sym(const char *name, ft_err *err)
{
    pthread_once(&g_once, load);
    if (!g_plugin) {
        ft_err_set(err, FT_ENODEV, "%s", g_why);
        return NULL;
    }
    void *f = dlsym(g_plugin, name);
    if (!f) ft_err_set(err, FT_ENODEV, "the CUDA back end lacks %s (%s)", name, dlerror());
    return f;
}

/* f = the plugin's NAME as a pointer of f's type (POSIX: dlsym's result converts through this) */
#define RESOLVE(f, name, err) (*(void **)(&(f)) = sym(name, err))

int ft_cuda_device_count(void)
{
    int (*f)(void) = NULL;
    if (!RESOLVE(f, "ft_cuda_device_count", NULL)) return 0;
    return f();
}

int ft_cuda_device_info(char *name, size_t cap, int *n_sm, ft_err *err)
{
    int (*f)(char *, size_t, int *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_device_info", err)) {
        if (name && cap) name[0] = 0;
        if (n_sm) *n_sm = 0;
        return FT_ENODEV;
    }
    return f(name, cap, n_sm, err);
}

int ft_cuda_quantize(const ft_qcfg *q, const float *x, int64_t rows, int64_t cols,
                     const int64_t *splits, uint32_t n_groups, float *out, void *stream,
                     ft_err *err)
{
    int (*f)(const ft_qcfg *, const float *, int64_t, int64_t, const int64_t *, uint32_t, float *,
             void *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_quantize", err)) return FT_ENODEV;
    return f(q, x, rows, cols, splits, n_groups, out, stream, err);
}

int ft_cuda_act_forward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                        const float *probs, float *z, void *stream, ft_err *err)
{
    int (*f)(const ft_act *, int64_t, int64_t, const float *, const float *, float *, void *,
             ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_act_forward", err)) return FT_ENODEV;
    return f(a, rows, k2, h, probs, z, stream, err);
}

int ft_cuda_act_backward(const ft_act *a, int64_t rows, int64_t k2, const float *h,
                         const float *probs, const float *dz, float *dh, float *dprobs,
                         void *stream, ft_err *err)
{
    int (*f)(const ft_act *, int64_t, int64_t, const float *, const float *, const float *, float *,
             float *, void *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_act_backward", err)) return FT_ENODEV;
    return f(a, rows, k2, h, probs, dz, dh, dprobs, stream, err);
}

int ft_cuda_nx_new(ft_nx **out, ft_err *err)
{
    int (*f)(ft_nx **, ft_err *) = NULL;
    *out = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_new", err)) return FT_ENODEV;
    return f(out, err);
}

int ft_cuda_nx_new_on(int device, ft_nx **out, ft_err *err)
{
    int (*f)(int, ft_nx **, ft_err *) = NULL;
    *out = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_new_on", err)) return FT_ENODEV;
    return f(device, out, err);
}

int ft_cuda_set_device(int device, ft_err *err)
{
    int (*f)(int, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_set_device", err)) return FT_ENODEV;
    return f(device, err);
}

void ft_cuda_nx_free(ft_nx *nx)
{
    void (*f)(ft_nx *) = NULL;
    if (nx && RESOLVE(f, "ft_cuda_nx_free", NULL)) f(nx);
}

int ft_cuda_mem_info(uint64_t *free_b, uint64_t *total_b, ft_err *err)
{
    int (*f)(uint64_t *, uint64_t *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_mem_info", err)) {
        if (free_b) *free_b = 0;
        if (total_b) *total_b = 0;
        return FT_ENODEV;
    }
    return f(free_b, total_b, err);
}

int ft_cuda_nx_problem(ft_nx *nx, const ft_nx_problem *p, ft_err *err)
{
    int (*f)(ft_nx *, const ft_nx_problem *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_problem", err)) return FT_ENODEV;
    return f(nx, p, err);
}

int ft_cuda_nx_run(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, unsigned flags, ft_err *err)
{
    int (*f)(ft_nx *, ft_mlp_path, const ft_mlp_quant *, unsigned, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_run", err)) return FT_ENODEV;
    return f(nx, path, q, flags, err);
}

int ft_cuda_nx_collect(ft_nx *nx, ft_nx_figs *figs, uint32_t n, ft_err *err)
{
    int (*f)(ft_nx *, ft_nx_figs *, uint32_t, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_collect", err)) return FT_ENODEV;
    return f(nx, figs, n, err);
}

int ft_cuda_nx_download(ft_nx *nx, int which, float *host, ft_err *err)
{
    int (*f)(ft_nx *, int, float *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_download", err)) return FT_ENODEV;
    return f(nx, which, host, err);
}

int ft_cuda_nx_reference(ft_nx *nx, int which, float *host, ft_err *err)
{
    int (*f)(ft_nx *, int, float *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_reference", err)) return FT_ENODEV;
    return f(nx, which, host, err);
}

int ft_cuda_nx_memory(ft_nx *nx, uint64_t *held, uint64_t *pool_peak, ft_err *err)
{
    int (*f)(ft_nx *, uint64_t *, uint64_t *, ft_err *) = NULL;
    if (!RESOLVE(f, "ft_cuda_nx_memory", err)) {
        if (held) *held = 0;
        if (pool_peak) *pool_peak = 0;
        return FT_ENODEV;
    }
    return f(nx, held, pool_peak, err);
}

int ft_cuda_nx_time(ft_nx *nx, ft_mlp_path path, const ft_mlp_quant *q, uint32_t warmup,
                    uint32_t rounds, ft_nx_time *out, ft_err *err)
{
    int (*f)(ft_nx *, ft_mlp_path, const ft_mlp_quant *, uint32_t, uint32_t, ft_nx_time *,
             ft_err *) = NULL;
    if (out) memset(out, 0, sizeof *out);
    if (!RESOLVE(f, "ft_cuda_nx_time", err)) return FT_ENODEV;
    return f(nx, path, q, warmup, rounds, out, err);
}

void ft_cuda_nx_profile(ft_nx *nx, int on, double ms[FT_NX_PHASES])
{
    void (*f)(ft_nx *, int, double *) = NULL;
    if (nx && RESOLVE(f, "ft_cuda_nx_profile", NULL)) {
        f(nx, on, ms);
        return;
    }
    if (ms)
        for (int i = 0; i < FT_NX_PHASES; i++)
            ms[i] = 0.0;
}
