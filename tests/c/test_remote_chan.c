/* The remote relay's channels (runtime/tools/remote_chan.c) without a link: what comes
 * across for a local end is handed on in order, and once that end has closed nothing
 * more is handed to it; each such message is counted once (issue 28: the relay posted
 * them to the closed end, where each was withdrawn again). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "offlow/chan.h"
#include "remote_chan.h"   /* (runtime/tools: linked with remote_chan.c) */

#define MS 1000000ull

/* A direct message from the far end for channel index 0. */
static void came(struct part_chans *pc, const char *msg)
{
    uint32_t idx = 0;
    part_chans_on_msg(pc, PART_CHAN_MSG, &idx, sizeof idx, msg, strlen(msg));
}

/* Poll the relay until `n` polls in a row moved nothing. */
static void settle(struct part_chans *pc, int n)
{
    for (int idle = 0; idle < n;) {
        int moved = part_chans_poll(pc);
        idle = moved ? 0 : idle + 1;
        usleep(1000);
    }
}

static void test_closed_end(void)
{
    size_t size = ofl_chan_region_size(1);
    void *region = aligned_alloc(4096, size);
    CHECK(region && ofl_chan_region_format(region, size, 1) == 0, "a region of one channel");
    int id = ofl_chan_create(region, "answers");
    struct ofl_chan_end host;
    CHECK(id >= 0 && ofl_chan_open(&host, region, (uint32_t)id, OFL_CHAN_A, NULL) == 0,
          "the host's end open");
    struct part_chans pc = {0};
    uint32_t ids[1] = {(uint32_t)id};
    CHECK(part_chans_start(&pc, NULL, region, OFL_CHAN_B, ids, 1, NULL) == 0,
          "the relay serves the other side");

    char buf[OFL_CHAN_MSG_MAX];
    came(&pc, "one");
    came(&pc, "two");
    int got = 0;
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < 1000 && part_chans_poll(&pc) == 0; k++) usleep(1000);
        int n = ofl_chan_recv(&host, buf, sizeof buf, 5000 * MS);
        got += n == 3 && !memcmp(buf, i ? "two" : "one", 3);
    }
    CHECK(got == 2 && pc.posts == 2, "open end: both handed on in order (%d, posts %llu)", got,
          (unsigned long long)pc.posts);

    ofl_chan_close(&host);
    came(&pc, "three");
    came(&pc, "four");
    came(&pc, "five");
    settle(&pc, 20);
    CHECK(pc.posts == 2 && pc.peer_closed == 3 && !pc.err[0],
          "closed end: nothing more handed on, the three counted once, no error (posts "
          "%llu, peer_closed %llu)", (unsigned long long)pc.posts,
          (unsigned long long)pc.peer_closed);
    part_chans_stop(&pc);
    CHECK(pc.untaken == 0 && pc.stop_unhanded == 0 && pc.dropped == 0,
          "closed end: counted nowhere else (untaken %llu, unhanded %llu, dropped %llu)",
          (unsigned long long)pc.untaken, (unsigned long long)pc.stop_unhanded,
          (unsigned long long)pc.dropped);
    free(region);
}

int main(void)
{
    test_closed_end();
    return CHECK_DONE();
}
