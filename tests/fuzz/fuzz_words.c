/* libFuzzer target: the word splitter (words.h) on arbitrary bytes.
 *
 * The input is the text (an exactly sized heap copy, so ASan catches a read past its
 * end). Every word must be non-empty, hold no whitespace, start after the previous one
 * with only whitespace between, and the words with the whitespace between them must
 * make up the whole text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "offlow/words.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65535) return 0;
    uint8_t *p = malloc(size ? size : 1);
    if (!p) return 0;
    memcpy(p, data, size);
    uint32_t at = 0, start, n, covered = 0;
    while ((n = ofl_word_next(p, (uint32_t)size, &at, &start)) != 0) {
        if (start < covered || at != start + n || at > size) abort();
        for (uint32_t i = covered; i < start; i++)
            if (!ofl_word_space(p[i])) abort();   /* only whitespace between words */
        for (uint32_t i = start; i < at; i++)
            if (ofl_word_space(p[i])) abort();    /* none inside a word */
        if (at < size && !ofl_word_space(p[at])) abort();   /* the word is maximal */
        covered = at;
    }
    for (uint32_t i = covered; i < size; i++)
        if (!ofl_word_space(p[i])) abort();       /* nothing but whitespace is left */
    free(p);
    return 0;
}
