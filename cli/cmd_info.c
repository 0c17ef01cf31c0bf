/* cmd_info.c - `fusertrace info`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace info: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
