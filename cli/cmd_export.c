/* cmd_export.c - `fusertrace export`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_export(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace export: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
