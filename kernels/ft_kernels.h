/* ft_kernels.h - placeholder until the kernels module lands. */
#ifndef FT_KERNELS_H
#define FT_KERNELS_H
#include "ft_common.h"
#endif
