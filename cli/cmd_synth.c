/* cmd_synth.c - `fusertrace synth`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_synth(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace synth: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
