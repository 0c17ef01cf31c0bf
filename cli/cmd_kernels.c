/* cmd_kernels.c - `fusertrace kernels`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_kernels(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace kernels: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
