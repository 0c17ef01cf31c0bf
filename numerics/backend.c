/*
 * backend.c - the back ends numerical replay runs on: one row each, over the one problem API of
 * kernels/ (ft_kernels.h, "numerical replay: one problem, two back ends"), timing included (the
 * time entry: the CPU's refuses, GPU time runs on the CUDA one). Adding a back end is its
 * ft_<name>_nx_* functions in kernels/ and one row here.
 */
#include "numerics_int.h"

static const nx_backend BACKENDS[] = {
    [FT_NUMERICS_CPU] = {.name = "cpu",
                         .device = 0,
                         .open = ft_cpu_nx_new,
                         .close = ft_cpu_nx_free,
                         .problem = ft_cpu_nx_problem,
                         .run = ft_cpu_nx_run,
                         .collect = ft_cpu_nx_collect,
                         .memory = ft_cpu_nx_memory,
                         .profile = ft_cpu_nx_profile,
                         .time = ft_cpu_nx_time},
    [FT_NUMERICS_CUDA] = {.name = "cuda",
                          .device = 1,
                          .open = ft_cuda_nx_new,
                          .close = ft_cuda_nx_free,
                          .problem = ft_cuda_nx_problem,
                          .run = ft_cuda_nx_run,
                          .collect = ft_cuda_nx_collect,
                          .memory = ft_cuda_nx_memory,
                          .profile = ft_cuda_nx_profile,
                          .n_devices = ft_cuda_device_count,
                          .open_on = ft_cuda_nx_new_on,
                          .set_device = ft_cuda_set_device,
                          .device_info = ft_cuda_device_info,
                          .mem_info = ft_cuda_mem_info,
                          .time = ft_cuda_nx_time},
};

const nx_backend *nx_backend_of(ft_numerics_backend be)
{
    return (unsigned)be < FT_ARRAY_LEN(BACKENDS) ? &BACKENDS[be] : NULL;
}

int ft_numerics_backend_check(ft_numerics_backend be, ft_err *err)
{
    const nx_backend *b = nx_backend_of(be);
    if (!b) return ft_err_set(err, FT_EINVAL, "numerics: unknown back end %d", (int)be);
    if (!b->device || b->n_devices() >= 1) return FT_OK;
    ft_nx *dev = NULL;
    ft_err derr = {0};
    int rc = b->open(&dev, &derr); /* says why: no CUDA build, or no device */
    if (dev) b->close(dev);
    return ft_err_set(err, FT_ENODEV, "numerics %s: %s; use --numerics cpu", b->name,
                      rc ? ft_err_msg(&derr) : "no CUDA device");
}

int ft_numerics_gputime_check(ft_err *err)
{
    const nx_backend *b = nx_backend_of(FT_NUMERICS_CUDA);
    if (b->n_devices() >= 1) return FT_OK;
    ft_nx *dev = NULL;
    ft_err derr = {0};
    int rc = b->open(&dev, &derr); /* says why: no CUDA build, or no device */
    if (dev) b->close(dev);
    return ft_err_set(err, FT_ENODEV,
                      "--gpu-time times the plans on a CUDA device, and there is none here: %s",
                      rc ? ft_err_msg(&derr) : "no CUDA device");
}
