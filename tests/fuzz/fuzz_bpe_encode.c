/* libFuzzer harness: any bytes through the pre-tokeniser and the encoder of
 * a vocabulary trained once on a fixed text: the pieces tile the input, a
 * valid UTF-8 character is never split, encoding is exact (decode gives the
 * input back, never more ids than bytes), encoding in parts cut by
 * tg_bpe_cut gives the same ids, and training on the input itself works. */
#include "fuzz_util.h"
#include "io/json.h"

static const char train_text[] =
    "It's the tokenizer's test: we'll train it on this, and they're sure you've seen it. 12345 678 9.0\n"
    "Les caf\xc3\xa9s \xc3\xa0 Paris; \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4!!  \n"
    "aaaaaaaaaaaaaaaa bbbbbbbb ------ ...... <|endoftext|>\n";

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static tg_bpe *b;
    if (!b && !(b = tg_bpe_train((const unsigned char *)train_text, sizeof train_text - 1, 400, NULL, NULL))) abort();
    for (size_t at = 0; at < size;) {
        size_t e = tg_bpe_pretokenize_next(data, size, at);
        if (e <= at || e > size) abort();
        if (e < size && (data[e] & 0xC0) == 0x80 && tg_json_valid_utf8(data, size))
            abort(); /* a piece of valid text ending inside a character */
        at = e;
    }
    int *ids = malloc((size ? size : 1) * sizeof *ids), *parts = malloc((size ? size : 1) * sizeof *parts);
    unsigned char *back = malloc(size ? size : 1);
    for (int flags = 0; flags < 2; flags++) {
        int64_t k = tg_bpe_encode(b, data, size, flags, ids);
        if (k < 0 || (size_t)k > size) abort();
        if (tg_bpe_decode(b, ids, (size_t)k, back, size) != (int64_t)size || (size && memcmp(back, data, size) != 0))
            abort();
        int64_t kp = 0;
        for (size_t at = 0; at < size;) {
            size_t end = tg_bpe_cut(data, size, at + 1 + size / 4);
            if (end <= at) abort();
            kp += tg_bpe_encode(b, data + at, end - at, flags, parts + kp);
            at = end;
        }
        if (kp != k || (k && memcmp(ids, parts, (size_t)k * sizeof *ids) != 0)) abort();
    }
    if (size < 4096) {
        tg_bpe *t = tg_bpe_train(data, size, 300, NULL, NULL);
        if (!t || tg_bpe_vocab_size(t) < 257 || tg_bpe_vocab_size(t) > 300) abort();
        int64_t k = tg_bpe_encode(t, data, size, 0, ids);
        if (k < 0 || tg_bpe_decode(t, ids, (size_t)k, back, size) != (int64_t)size ||
            (size && memcmp(back, data, size) != 0))
            abort();
        tg_bpe_free(t);
    }
    free(ids);
    free(parts);
    free(back);
    tg_clear_error();
    return 0;
}
