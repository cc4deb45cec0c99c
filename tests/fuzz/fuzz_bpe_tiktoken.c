/* libFuzzer harness: any bytes read as a tiktoken rank file
 * (tg_bpe_load_tiktoken) either load, and then the vocabulary encodes and
 * decodes a text containing every byte and a long run of one letter back
 * exactly, or are rejected with
 * a message naming the file; never a crash or a leak. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *path = input_path("v.tiktoken");
    write_input(path, data, size);
    tg_bpe *b = tg_bpe_load_tiktoken(path);
    if (!b) {
        if (!tg_last_error() || !strstr(tg_last_error(), path)) abort();
    } else {
        /* every byte, a run of one letter (long tokens: corpus/long64k.tiktoken), the separator */
        unsigned char text[512 + 700 + 13], back[sizeof text];
        int ids[sizeof text];
        for (int i = 0; i < 512; i++) text[i] = (unsigned char)(i * 7 + i / 256);
        memset(text + 512, 'a', 700);
        memcpy(text + 512 + 700, "<|endoftext|>", 13);
        int64_t k = tg_bpe_encode(b, text, sizeof text, TG_BPE_SPECIAL, ids);
        if (k <= 0 || tg_bpe_decode(b, ids, (size_t)k, back, sizeof back) != (int64_t)sizeof text ||
            memcmp(back, text, sizeof text) != 0 || ids[k - 1] != tg_bpe_special_id(b, TG_BPE_ENDOFTEXT))
            abort();
        tg_bpe_free(b);
    }
    tg_clear_error();
    return 0;
}
