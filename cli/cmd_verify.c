/* cmd_verify.c - `fusertrace verify`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_verify(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace verify: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
