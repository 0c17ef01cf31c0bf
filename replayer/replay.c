/* replay.c - placeholder until the replayer module lands. */
#include "ft_replay.h"
