/* recorder.c - placeholder until the recorder module lands. */
#include "ft_recorder.h"
