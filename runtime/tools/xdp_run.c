/* offlow-xdp: loads the XDP program a segment on the xdp target was compiled to
 * (offlow/targets/xdp.py) into the kernel with libbpf.
 *
 *   offlow-xdp --check OBJ PROG    load program PROG of object OBJ (the verifier runs),
 *                                  print the verifier's log on stderr when it refuses;
 *                                  exit 0 when the kernel accepts it, 1 otherwise.
 *
 * The verifier's log keeps the source lines (BTF line info, #line directives of the
 * generated code): offlow maps them back to the element and its body line. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <bpf/libbpf.h>

/* Prints libbpf's messages (the verifier's log among them) on stderr; debug ones not. */
static int ofl_xdp_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_DEBUG) return 0;
    return vfprintf(stderr, fmt, ap);
}

/* Loads program `prog` of `path` (and only it); 0, or a negative errno. */
static int ofl_xdp_check(const char *path, const char *prog)
{
    struct bpf_object *obj = bpf_object__open_file(path, NULL);
    if (!obj) return -1;
    struct bpf_program *p;
    int found = 0;
    bpf_object__for_each_program(p, obj) {
        int mine = strcmp(bpf_program__name(p), prog) == 0;
        found |= mine;
        bpf_program__set_autoload(p, mine);
    }
    /* one frame buffer per CPU (see the generated program's ofl_frames) */
    struct bpf_map *frames = bpf_object__find_map_by_name(obj, "ofl_frames");
    int ncpus = libbpf_num_possible_cpus();
    if (frames && ncpus > 0) bpf_map__set_max_entries(frames, (unsigned)ncpus);
    int rc = found ? bpf_object__load(obj) : -2;
    if (!found) fprintf(stderr, "offlow-xdp: %s has no program %s\n", path, prog);
    bpf_object__close(obj);
    return rc;
}

int main(int argc, char **argv)
{
    libbpf_set_print(ofl_xdp_print);
    if (argc == 4 && strcmp(argv[1], "--check") == 0)
        return ofl_xdp_check(argv[2], argv[3]) == 0 ? 0 : 1;
    fprintf(stderr, "usage: %s --check OBJ PROG\n", argv[0]);
    return 2;
}
