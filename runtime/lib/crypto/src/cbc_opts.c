/* The key table as a program's table object: its options from the command line (the
 * glue between gen.h's options and cbc.c, which needs no program). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/cbc.h"
#include "offlow/file.h"
#include "offlow/gen.h"

int ofl_cbc_table_open_opts(struct ofl_cbc_table **t, const struct ofl_args *a, const char *name)
{
    const char *path = ofl_args_get(a, name, "path", NULL);
    const char *cipher = ofl_args_get(a, name, "cipher", "aes-128-cbc");
    enum ofl_cbc_cipher c;
    if (!strcmp(cipher, "aes-128-cbc")) c = OFL_CBC_AES128;
    else if (!strcmp(cipher, "bf-cbc")) c = OFL_CBC_BLOWFISH;
    else {
        ofl_start_failf(a, "key table %s: cipher=%s: expected aes-128-cbc or bf-cbc",
                        name, cipher);
        return -EINVAL;
    }
    if (!path || !*path) {
        ofl_start_failf(a, "key table %s: no key file (--opt %s.path=FILE)",
                        name, name);
        return -EINVAL;
    }
    void *text;
    size_t len;
    int rc = ofl_file_read(path, &text, &len);
    if (rc < 0) {
        ofl_start_failf(a, "key table %s: %s: %s", name, path, strerror(-rc));
        return rc;
    }
    char errbuf[256] = "";
    rc = ofl_cbc_table_parse(t, text, len, c, errbuf);
    free(text);
    if (rc < 0)
        ofl_start_failf(a, "key table %s: %s: %s", name, path, errbuf);
    return rc;
}
