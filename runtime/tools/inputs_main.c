/* offlow-inputs: a run's inputs read as its sources will read them (pcap_port.c,
 * synth.c), so that the runner can check them and size the queues before any
 * process starts.
 *
 * usage: offlow-inputs pcap PATH
 *          prints "frames N longest L": the capture's records and its longest frame
 *          in bytes (raw IP: with the Ethernet header a source puts in front)
 *        offlow-inputs synth SIZES [PREFIXES]
 *          prints "largest S": the size mix's largest frame (its prefix file read too)
 * On bad input it prints the source's own message (not a capture, a truncated
 * record, a bad size mix, an unreadable prefix file ...) to stderr and exits 1. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "offlow/pcap_port.h"
#include "offlow/synth.h"

static int usage(void)
{
    fprintf(stderr, "usage: offlow-inputs pcap PATH | offlow-inputs synth SIZES [PREFIXES]\n");
    return 2;
}

int main(int argc, char **argv)
{
    /* An mtu above any frame: every record is kept and measured, every size allowed. */
    struct ofl_src_opts o = { .part = 0, .nparts = 1, .loops = 1, .mtu = UINT32_MAX,
                              .count = 1 };
    struct ofl_src *s;
    char err[256] = "";
    if (argc == 3 && !strcmp(argv[1], "pcap")) {
        if (ofl_pcap_src_open(&s, argv[2], &o, err) < 0) goto bad;
        printf("frames %" PRIu64 " longest %" PRIu32 "\n", ofl_pcap_src_file_packets(s),
               ofl_pcap_src_longest(s));
    } else if ((argc == 3 || argc == 4) && !strcmp(argv[1], "synth")) {
        struct ofl_size_mix m;
        if (ofl_size_mix_parse(&m, argv[2], err) < 0) goto bad;
        struct ofl_synth_opts so = { .sizes = argv[2], .prefixes = argc == 4 ? argv[3] : NULL };
        if (ofl_synth_src_open(&s, &so, &o, err) < 0) goto bad;
        uint32_t largest = 0;
        for (uint32_t i = 0; i < m.n; i++)
            if (m.size[i] > largest) largest = m.size[i];
        printf("largest %" PRIu32 "\n", largest);
    } else {
        return usage();
    }
    ofl_src_close(s);
    return 0;
bad:
    fprintf(stderr, "%s\n", err);
    return 1;
}
