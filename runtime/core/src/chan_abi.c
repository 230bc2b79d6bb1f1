/* Sizes of channel structures for foreign-function callers (see chan.h). */
#include "offlow/chan.h"

size_t ofl_chan_end_size(void)
{
    return sizeof(struct ofl_chan_end);
}
