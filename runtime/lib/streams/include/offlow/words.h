/* Words of a text stream (the word count's SplitWords): a word is a maximal run of
 * bytes other than ASCII whitespace (space, \t, \n, \v, \f, \r), as Python's
 * bytes.split() cuts them. */
#ifndef OFL_WORDS_H
#define OFL_WORDS_H

#include <stdint.h>

/* Whether `c` separates words. */
static inline int ofl_word_space(uint8_t c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* The next word of `p` (`len` bytes) at or after *at: its start in *start and its
 * length returned (at least 1), *at moved past it; 0 when no word is left. Never
 * reads outside p[0..len). */
static inline uint32_t ofl_word_next(const uint8_t *p, uint32_t len, uint32_t *at,
                                     uint32_t *start)
{
    uint32_t i = *at;
    while (i < len && ofl_word_space(p[i])) i++;
    *start = i;
    while (i < len && !ofl_word_space(p[i])) i++;
    *at = i;
    return i - *start;
}

#endif
