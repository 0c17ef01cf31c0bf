/* cmd_demo.c - `fusertrace demo`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_demo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace demo: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
