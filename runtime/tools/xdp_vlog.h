/* The kernel verifier's log of an XDP program it refused, as the run says it
 * (xdp_run.c): the log is kept whole in a file beside the program's object, and the
 * run's one error quotes its reason and the source line it was at.
 *
 * The log (libbpf's bpf_program__set_log_buf, verifier log level 1) is a trace of the
 * instructions the verifier walked, each source line the object's line info names as
 * a comment before its instructions ("; TEXT @ FILE:LINE": the generated code's #line
 * directives point these at the user's program), then the error line(s) that say why
 * and a summary ("processed N insns (limit ...) ..."). */
#ifndef OFL_XDP_VLOG_H
#define OFL_XDP_VLOG_H

#include <stddef.h>

/* The log buffer a load gets: 8 MiB. A longer log keeps its end (the kernel, 6.4+,
 * rotates it), where the reason is; an older kernel keeps its start and the reason is
 * lost (the error then quotes what the log's end says). */
#define OFL_XDP_VLOG_CAP (8u << 20)

/* The reason verifier log `log` gives, into `why` (`cap` bytes, at least 1; always
 * ended, cut short to fit): the error line(s) just before the summary ("processed N
 * insns") or, without a summary, at the log's end: the lines there that are no
 * instruction, register state or source comment, up to 4 of them joined by "; ";
 * then ", at FILE:LINE: `TEXT`" for the last source comment with text before them,
 * when there is one. Returns the bytes written, or 0 when the log has no such line
 * (empty, or only instructions): `why` is then "". */
size_t ofl_xdp_vlog_reason(const char *log, char *why, size_t cap);

/* Where the log of object `obj` is kept: `obj` without its ".o", then ".verifier.log"
 * (beside the object: xdp.bpf.o -> xdp.bpf.verifier.log), into `path` (`cap` bytes).
 * 0, or -ENAMETOOLONG. */
int ofl_xdp_vlog_path(const char *obj, char *path, size_t cap);

/* Write `log` to `path` whole: into a temporary file beside it, then renamed over it,
 * so that a reader (or a second run refused at once) never sees a part of one. 0, or a
 * negative errno (nothing left behind). */
int ofl_xdp_vlog_save(const char *path, const char *log);

#endif
