/* ft_replay.h - placeholder until the replayer module lands. */
#ifndef FT_REPLAY_H
#define FT_REPLAY_H
#include "ft_trace.h"
#endif
