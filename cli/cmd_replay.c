/* cmd_replay.c - `fusertrace replay`: placeholder until its module lands. */
#include "cli.h"

#include <stdio.h>

int cmd_replay(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "fusertrace replay: not implemented yet\n");
    return FT_EXIT_INTERNAL;
}
