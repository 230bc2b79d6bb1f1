/* Tests of the verifier's log as the xdp target says it (runtime/tools/xdp_vlog.c): the
 * reason is the error line(s) before the log's summary, with the last source line
 * before them; where the log is kept; the log written whole. The logs are the kernel's
 * (6.x, log level 1), cut to their ends. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "xdp_vlog.h"

/* The log of an unbounded read (a user's element, its line info pointing at its file). */
static const char UNBOUNDED[] =
    "0: R1=ctx() R10=fp0\n"
    ";  @ xdp.bpf.c:102\n"
    "0: (bf) r6 = r1                       ; R1=ctx() R6=ctx()\n"
    "; return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16; @ pkt.h:57\n"
    "76: (4f) r2 |= r1                     ; R1=scalar() R2=scalar()\n"
    "; if (pkt->data[at] == 7) DROP(); @ peek.py:13\n"
    "77: (0f) r9 += r2                     ; R2=scalar(smin=0,smax=umax=0xffffffff)\n"
    "78: (71) r1 = *(u8 *)(r9 +0)\n"
    "R9 unbounded memory access, make sure to bounds check any such access\n"
    "processed 81 insns (limit 1000000) max_states_per_insn 0 total_states 7 peak_states 7 "
    "mark_read 0\n";

static void test_the_reason_and_the_users_line(void)
{
    char why[512];
    size_t n = ofl_xdp_vlog_reason(UNBOUNDED, why, sizeof why);
    const char *want = "R9 unbounded memory access, make sure to bounds check any such access, "
                       "at peek.py:13: `if (pkt->data[at] == 7) DROP();`";
    CHECK(strcmp(why, want) == 0 && n == strlen(want), "the error line, at the user's line: %s",
          why);
}

static void test_two_error_lines_and_statistics_after_the_summary(void)
{
    const char *log =
        "; uint8_t b = pkt->data[off]; /* a @ in the text */ @ prog.py:21\n"
        "12: (71) r3 = *(u8 *)(r2 +14)\n"
        "invalid access to packet, off=14 size=1, R2(id=0,off=14,r=0)\n"
        "R2 offset is outside of the packet\n"
        "processed 12 insns (limit 1000000) max_states_per_insn 0 total_states 1\n"
        "verification time 31 usec\n"
        "stack depth 8\n";
    char why[512];
    ofl_xdp_vlog_reason(log, why, sizeof why);
    CHECK(strcmp(why, "invalid access to packet, off=14 size=1, R2(id=0,off=14,r=0); R2 offset "
                      "is outside of the packet, at prog.py:21: `uint8_t b = pkt->data[off]; "
                      "/* a @ in the text */`") == 0,
          "both error lines, in order; the source split at its last \" @ \": %s", why);
}

static void test_a_source_comment_without_text_is_passed_over(void)
{
    const char *log =
        "; spent[b] += pkt->len; @ buckets.py:40\n"
        "30: (07) r1 += 1\n"
        ";  @ xdp.bpf.c:0\n"
        "31: (79) r2 = *(u64 *)(r1 +0)\n"
        "from 30 to 31: R1=map_value(map=spent) R2=scalar()\n"
        "R1 min value is outside of the allowed memory range\n"
        "processed 40 insns (limit 1000000)\n";
    char why[512];
    ofl_xdp_vlog_reason(log, why, sizeof why);
    CHECK(strcmp(why, "R1 min value is outside of the allowed memory range, at buckets.py:40: "
                      "`spent[b] += pkt->len;`") == 0,
          "the last source line with text, past a branch's state: %s", why);
}

static void test_no_summary_no_line_info(void)
{
    const char *log = "0: R1=ctx() R10=fp0\n"
                      "5: (85) call bpf_map_lookup_elem#1\n"
                      "caller:\n"
                      " R6=ctx() R10=fp0\n"
                      "R1 type=scalar expected=map_ptr\n"
                      "\n";
    char why[512];
    ofl_xdp_vlog_reason(log, why, sizeof why);
    CHECK(strcmp(why, "R1 type=scalar expected=map_ptr") == 0,
          "without a summary: the log's last words; without line info: no place: %s", why);
}

static void test_the_last_four_error_lines_only(void)
{
    const char *log = "3: (95) exit\nfirst\nsecond\nthird\nfourth\nfifth\nprocessed 4 insns\n";
    char why[512];
    ofl_xdp_vlog_reason(log, why, sizeof why);
    CHECK(strcmp(why, "second; third; fourth; fifth") == 0, "the four nearest the end: %s", why);
}

static void test_no_reason(void)
{
    char why[64] = "stale";
    CHECK(ofl_xdp_vlog_reason("", why, sizeof why) == 0 && why[0] == '\0', "an empty log: none");
    strcpy(why, "stale");
    CHECK(ofl_xdp_vlog_reason("0: R1=ctx() R10=fp0\n1: (b7) r0 = 2\n", why, sizeof why) == 0 &&
              why[0] == '\0',
          "a log of instructions only (cut short): none");
}

static void test_a_reason_cut_to_fit(void)
{
    char why[16];
    size_t n = ofl_xdp_vlog_reason(UNBOUNDED, why, sizeof why);
    CHECK(n == 15 && strcmp(why, "R9 unbounded me") == 0, "cut to the buffer, ended: %s", why);
}

static void test_the_log_beside_the_object(void)
{
    char path[64];
    CHECK(ofl_xdp_vlog_path("/c/prog-1/xdp.bpf.o", path, sizeof path) == 0 &&
              strcmp(path, "/c/prog-1/xdp.bpf.verifier.log") == 0,
          "xdp.bpf.o: %s", path);
    CHECK(ofl_xdp_vlog_path("obj", path, sizeof path) == 0 &&
              strcmp(path, "obj.verifier.log") == 0,
          "a name without .o: %s", path);
    char small[16];
    CHECK(ofl_xdp_vlog_path("/c/prog-1/xdp.bpf.o", small, sizeof small) == -ENAMETOOLONG,
          "a path too long for the buffer: -ENAMETOOLONG");
}

static void test_the_log_written_whole(void)
{
    char dir[] = "/tmp/ofl-vlog-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    char path[256], back[sizeof UNBOUNDED + 16];
    snprintf(path, sizeof path, "%s/xdp.bpf.verifier.log", dir);
    CHECK(ofl_xdp_vlog_save(path, UNBOUNDED) == 0, "saved");
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(back, 1, sizeof back, f) : 0;
    if (f) fclose(f);
    CHECK(n == strlen(UNBOUNDED) && memcmp(back, UNBOUNDED, n) == 0, "read back whole (%zu)",
          n);
    CHECK(ofl_xdp_vlog_save(path, "again\n") == 0, "saved again, over it");
    f = fopen(path, "r");
    n = f ? fread(back, 1, sizeof back, f) : 0;
    if (f) fclose(f);
    CHECK(n == 6 && memcmp(back, "again\n", 6) == 0, "the new log only");
    unlink(path);
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such.log", dir);
    CHECK(ofl_xdp_vlog_save(missing, "x") == -ENOENT, "a folder that is not there: -ENOENT");
    CHECK(rmdir(dir) == 0, "nothing left behind (the folder removed empty)");
}

int main(void)
{
    test_the_reason_and_the_users_line();
    test_two_error_lines_and_statistics_after_the_summary();
    test_a_source_comment_without_text_is_passed_over();
    test_no_summary_no_line_info();
    test_the_last_four_error_lines_only();
    test_no_reason();
    test_a_reason_cut_to_fit();
    test_the_log_beside_the_object();
    test_the_log_written_whole();
    return CHECK_DONE();
}
