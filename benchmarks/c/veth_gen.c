/* The traffic generator of `offlow bench xdp`'s end-to-end half (benchmarks/xdp_e2e.py):
 * sends the given frames, round robin, into interface IFACE as fast as one core can
 * (an AF_PACKET socket that bypasses the qdisc, sendmmsg in batches of 64) for SECONDS,
 * then prints {"sent": N, "refused": N, "seconds": S}: the frames the kernel took, the
 * sends it refused (a full queue), and the time taken.
 *
 * usage: veth_gen IFACE SECONDS HEXFRAME... */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64
#define FRAME_MAX 2048

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Decode hex `h` into `out` (at most FRAME_MAX bytes); returns the length, or -1. */
static int unhex(const char *h, uint8_t *out)
{
    size_t n = strlen(h);
    if (n % 2 || n / 2 > FRAME_MAX || n < 28) return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return (int)(n / 2);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s IFACE SECONDS HEXFRAME...\n", argv[0]);
        return 2;
    }
    int nframes = argc - 3;
    uint8_t (*frames)[FRAME_MAX] = calloc((size_t)nframes, FRAME_MAX);
    int *lens = calloc((size_t)nframes, sizeof *lens);
    if (!frames || !lens) return 1;
    for (int i = 0; i < nframes; i++)
        if ((lens[i] = unhex(argv[3 + i], frames[i])) < 0) {
            fprintf(stderr, "veth_gen: frame %d is not a hex Ethernet frame\n", i);
            return 2;
        }
    double seconds = atof(argv[2]);
    int s = socket(AF_PACKET, SOCK_RAW, 0);  /* (protocol 0: sends, receives nothing) */
    unsigned ifindex = if_nametoindex(argv[1]);
    if (s < 0 || !ifindex) {
        fprintf(stderr, "veth_gen: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int one = 1;
    setsockopt(s, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = (int)ifindex,
                              .sll_halen = 6 };
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    for (int i = 0; i < BATCH; i++) {
        iov[i] = (struct iovec){ .iov_base = frames[i % nframes],
                                 .iov_len = (size_t)lens[i % nframes] };
        msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = &to, .msg_namelen = sizeof to,
                                                 .msg_iov = &iov[i], .msg_iovlen = 1 } };
    }
    uint64_t sent = 0, refused = 0;
    double t0 = now_s(), t = t0;
    for (unsigned calls = 1; t - t0 < seconds; calls++) {
        int n = sendmmsg(s, msgs, BATCH, 0);
        if (n > 0) sent += (uint64_t)n;
        if (n < BATCH) refused++;
        if (calls % 64 == 0) t = now_s();
    }
    t = now_s();
    printf("{\"sent\": %llu, \"refused\": %llu, \"seconds\": %.6f}\n",
           (unsigned long long)sent, (unsigned long long)refused, t - t0);
    close(s);
    free(frames);
    free(lens);
    return 0;
}
