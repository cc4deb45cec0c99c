/* libFuzzer harness: the input, cut at its first NUL byte, read as GPT-2's
 * encoder.json (before) and vocab.bpe (after) by tg_bpe_load_gpt2: either
 * they load, and then every byte encodes and decodes back, or they are
 * rejected with a message; never a crash or a leak. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    static char enc[96], voc[96];
    if (!enc[0]) {
        snprintf(enc, sizeof enc, "/tmp/tgrad-fuzz-%ld-encoder.json", (long)getpid());
        snprintf(voc, sizeof voc, "/tmp/tgrad-fuzz-%ld-vocab.bpe", (long)getpid());
    }
    const unsigned char *nul = memchr(data, 0, size);
    size_t cut = nul ? (size_t)(nul - data) : size;
    write_input(enc, data, cut);
    write_input(voc, data + (nul ? cut + 1 : size), nul ? size - cut - 1 : 0);
    tg_bpe *b = tg_bpe_load_gpt2(enc, voc);
    if (!b) {
        if (!tg_last_error() || !strstr(tg_last_error(), "bpe_load_gpt2: ")) abort();
    } else {
        unsigned char text[256], back[256];
        int ids[256];
        for (int i = 0; i < 256; i++) text[i] = (unsigned char)(255 - i);
        int64_t k = tg_bpe_encode(b, text, sizeof text, 0, ids);
        if (k <= 0 || tg_bpe_decode(b, ids, (size_t)k, back, sizeof back) != 256 || memcmp(back, text, 256) != 0)
            abort();
        tg_bpe_free(b);
    }
    tg_clear_error();
    return 0;
}
