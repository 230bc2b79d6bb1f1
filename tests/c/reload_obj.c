/* A reload's shared object for tests/c/test_reload.c: its turns count in the second
 * counter of the loop state (the old code counts in the first); its layout and number
 * of turns are defined before it is included (OBJ_LAYOUT, OBJ_TURNS). */
#include <stdint.h>

#include "offlow/reload.h"

static int turn_new(void *loop)
{
    __atomic_fetch_add(&((uint64_t *)loop)[1], 1, __ATOMIC_RELAXED);
    return 1;
}

static const ofl_turn_fn turns[] = {turn_new, turn_new, turn_new};

const struct ofl_reload_entry ofl_reload_entry = {OBJ_LAYOUT, OBJ_TURNS, turns};
