/* The kernel verifier's log of a refused XDP program (xdp_vlog.h). */
#include "xdp_vlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The most error lines the reason quotes (the verifier says why in one or two). */
#define OFL_VLOG_WHY_LINES 4

/* One line of the log: its text, without the newline. */
struct vline {
    const char *s;
    size_t n;
};

/* The line before `*at` (the start of a line, or the log's end) in `log`, moving `*at`
 * to its start; false at the log's start. */
static bool prev_line(const char *log, const char **at, struct vline *l)
{
    const char *e = *at;
    if (e == log) return false;
    if (e[-1] == '\n') e--;
    const char *s = e;
    while (s > log && s[-1] != '\n') s--;
    *l = (struct vline){ s, (size_t)(e - s) };
    *at = s;
    return true;
}

static bool starts(const struct vline *l, const char *prefix)
{
    size_t n = strlen(prefix);
    return l->n >= n && memcmp(l->s, prefix, n) == 0;
}

static bool blank(const struct vline *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->s[i] != ' ' && l->s[i] != '\t' && l->s[i] != '\r') return false;
    return true;
}

/* The summary the verifier ends its log with (and, with statistics, its times). */
static bool summary(const struct vline *l)
{
    return starts(l, "processed ") || starts(l, "verification time ") ||
           starts(l, "stack depth ");
}

/* A line of the trace, not of the verifier's words: an instruction or the registers
 * at one ("12: (bf) r1 = r6", "0: R1=ctx() R10=fp0"), a branch's state ("from 4 to 6:
 * ..."), a source comment ("; TEXT @ FILE:LINE"), a call's frames (indented, "caller:",
 * "callee:"), a function's start ("func#1 ...", "Validating f() func#1..."). */
static bool trace(const struct vline *l)
{
    if (l->n == 0) return false;
    char c = l->s[0];
    return (c >= '0' && c <= '9') || c == ';' || c == ' ' || c == '\t' ||
           starts(l, "from ") || starts(l, "func#") || starts(l, "Validating ") ||
           starts(l, "caller:") || starts(l, "callee:") || starts(l, "returning from ") ||
           starts(l, "mark_precise") || starts(l, "last_idx ") || starts(l, "regs=") ||
           starts(l, "parent ");
}

/* From source comment `l` ("; TEXT @ FILE:LINE"): its text and where, both trimmed;
 * false when it is none or its text is empty (code the compiler made). */
static bool source(const struct vline *l, struct vline *text, struct vline *where)
{
    if (!starts(l, ";")) return false;
    const char *at = NULL;  /* the last " @ " (the text itself may hold one) */
    for (size_t i = 1; i + 3 <= l->n; i++)
        if (memcmp(l->s + i, " @ ", 3) == 0) at = l->s + i;
    if (!at) return false;
    const char *s = l->s + 1, *e = at;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    const char *w = at + 3, *we = l->s + l->n;
    while (we > w && (we[-1] == ' ' || we[-1] == '\r')) we--;
    if (s == e || w == we) return false;
    *text = (struct vline){ s, (size_t)(e - s) };
    *where = (struct vline){ w, (size_t)(we - w) };
    return true;
}

/* Append `n` bytes of `s` to `why` (holding `*len` of its `cap`), as far as they fit. */
static void put(char *why, size_t cap, size_t *len, const char *s, size_t n)
{
    size_t room = cap - 1 - *len;
    if (n > room) n = room;
    memcpy(why + *len, s, n);
    *len += n;
    why[*len] = '\0';
}

size_t ofl_xdp_vlog_reason(const char *log, char *why, size_t cap)
{
    why[0] = '\0';
    const char *at = log + strlen(log);
    struct vline l, said[OFL_VLOG_WHY_LINES];
    unsigned n = 0;
    bool more = prev_line(log, &at, &l);
    while (more && (blank(&l) || summary(&l)))  /* (the summary, after the reason) */
        more = prev_line(log, &at, &l);
    /* the error lines, from the last back (said[0]: the last), the nearest the end kept */
    for (; more && !trace(&l); more = prev_line(log, &at, &l))
        if (!blank(&l) && n < OFL_VLOG_WHY_LINES) said[n++] = l;
    if (n == 0) return 0;
    size_t len = 0;
    for (unsigned i = n; i-- > 0;) {
        put(why, cap, &len, said[i].s, said[i].n);
        if (i) put(why, cap, &len, "; ", 2);
    }
    struct vline text, where;
    for (; more; more = prev_line(log, &at, &l)) {
        if (!source(&l, &text, &where)) continue;
        put(why, cap, &len, ", at ", 5);
        put(why, cap, &len, where.s, where.n);
        put(why, cap, &len, ": `", 3);
        put(why, cap, &len, text.s, text.n);
        put(why, cap, &len, "`", 1);
        break;
    }
    return len;
}

int ofl_xdp_vlog_path(const char *obj, char *path, size_t cap)
{
    size_t n = strlen(obj);
    if (n >= 2 && strcmp(obj + n - 2, ".o") == 0) n -= 2;
    int w = snprintf(path, cap, "%.*s.verifier.log", (int)n, obj);
    return w < 0 || (size_t)w >= cap ? -ENAMETOOLONG : 0;
}

int ofl_xdp_vlog_save(const char *path, const char *log)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    int rc = 0;
    for (size_t off = 0, n = strlen(log); off < n && rc == 0;) {
        ssize_t w = write(fd, log + off, n - off);
        if (w < 0 && errno != EINTR) rc = -errno;
        if (w > 0) off += (size_t)w;
    }
    if (close(fd) < 0 && rc == 0) rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0) rc = -errno;
    if (rc < 0) unlink(tmp);
    return rc;
}
