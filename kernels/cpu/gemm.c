/* gemm.c - placeholder until the CPU kernels land. */
#include "ft_kernels.h"
