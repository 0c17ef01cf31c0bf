/* cmd_import.c - `fusertrace import`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_import(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace import: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
