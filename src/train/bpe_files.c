/* Vocabulary files (bpe.h): GPT-2's encoder.json + vocab.bpe, and
 * tiktoken's rank format. Every reader checks everything it relies on and
 * names the file and line of the first problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../io/file.h"
#include "../io/json.h"
#include "../tensor/tensor.h"
#include "bpe_internal.h"
#include "train.h"

/* One bound for every id: a vocabulary has at most TG_MAX_VOCAB ids (train.h:
 * what a token file holds and an embedding takes), its special tokens
 * included, so a rank is below TG_MAX_VOCAB - 1 and <|endoftext|>, added after
 * the largest rank, is below TG_MAX_VOCAB too (a rank of 2^24 - 1 made a
 * vocabulary one id past what a token file holds). 16M tokens is far past
 * any BPE in use (GPT-4o's has 200k). */
#define MAX_RANK (TG_MAX_VOCAB - 1)

/* ---- GPT-2's byte-to-unicode mapping ---------------------------------------------
 * encoder.py's bytes_to_unicode(): GPT-2 writes a token's bytes as one
 * printable code point each, so the files are text. The bytes '!'..'~',
 * U+00A1..U+00AC and U+00AE..U+00FF stand for themselves; the other 68
 * (controls, space, 0x7F..0xA0, the soft hyphen 0xAD) become U+0100, U+0101,
 * ... in byte order. Here, the inverse: a code point to its byte, or -1. */
static int unicode_to_byte(unsigned cp) {
    if ((cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    unsigned k = cp - 256; /* the k-th of the 68 others: 0x00-0x20 (33), 0x7F-0xA0 (34), 0xAD */
    return k < 33 ? (int)k : k < 67 ? (int)(0x7F + k - 33) : 0xAD;
}

/* Decodes s (UTF-8, len bytes) through the mapping into out (room for len
 * bytes: each code point is at least one byte); the byte count, or -1. */
static long unmap(const unsigned char *s, size_t len, unsigned char *out) {
    long k = 0;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i], cp;
        if (c < 0x80) {
            cp = c;
            i++;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < len && (s[i + 1] & 0xC0) == 0x80) {
            cp = (c & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu);
            i += 2;
        } else {
            return -1; /* the mapping's code points are all below U+0800 */
        }
        int byte = unicode_to_byte(cp);
        if (byte < 0) return -1;
        out[k++] = (unsigned char)byte;
    }
    return k;
}

/* The line (1-based) of byte pos of buf. */
static long line_of(const unsigned char *buf, size_t pos) {
    long line = 1;
    for (size_t i = 0; i < pos; i++) line += buf[i] == '\n';
    return line;
}

/* ---- encoder.json + vocab.bpe ------------------------------------------------------ */
typedef struct {
    bpe_span *tok; /* [count] by id, into bytes; len 0 until seen */
    unsigned char *bytes;
    size_t len, cap;
    int count;
} id_list;

/* Reads encoder.json into e: every id in [0, count) exactly once. On error
 * *why says what, *at the byte where. */
static int read_encoder(const unsigned char *buf, size_t size, id_list *e, char *why, size_t whylen, size_t *at) {
    tg_json j = {(const char *)buf, (const char *)buf + size, (const char *)buf, ""};
    enum { KEY = 4096 };
    char key[KEY];
    unsigned char raw[KEY];
    size_t cap = 0;
    int r = tg_json_open(&j, '{', '}'); /* 1: empty, 0: items follow */
    while (r == 0) {
        size_t len, key_at = (size_t)tg_json_pos(&j);
        uint64_t id;
        if (tg_json_string(&j, key, sizeof key, &len) != 0 || tg_json_expect(&j, ':') != 0 ||
            tg_json_uint(&j, &id, "token id") != 0)
            break;
        *at = key_at;
        long n = len < KEY ? unmap((const unsigned char *)key, len, raw) : -1;
        if (len == 0 || len >= KEY || n < 0) {
            snprintf(why, whylen, "token \"%.40s\"%s is not in GPT-2's byte-to-unicode alphabet", key,
                     len >= KEY ? " (too long)" : "");
            return -1;
        }
        if (id >= MAX_RANK) {
            snprintf(why, whylen, "token \"%.40s\": id %llu is too large (at most %d)", key, (unsigned long long)id,
                     MAX_RANK - 1);
            return -1;
        }
        if ((size_t)id >= cap) {
            size_t old = cap;
            if (bpe_grow((void **)&e->tok, &cap, (size_t)id + 1, sizeof *e->tok) != 0) goto oom;
            memset(e->tok + old, 0, (cap - old) * sizeof *e->tok);
        }
        if (e->tok[id].len) {
            snprintf(why, whylen, "id %llu given twice (\"%.40s\")", (unsigned long long)id, key);
            return -1;
        }
        if (bpe_grow((void **)&e->bytes, &e->cap, e->len + (size_t)n, 1) != 0) goto oom;
        memcpy(e->bytes + e->len, raw, (size_t)n);
        e->tok[id] = (bpe_span){(uint32_t)e->len, (uint32_t)n};
        e->len += (size_t)n;
        if ((int)id >= e->count) e->count = (int)id + 1;
        r = tg_json_next(&j, '}'); /* 1: another item, 0: the end */
        r = r == 1 ? 0 : r == 0 ? 1 : -1;
    }
    *at = (size_t)tg_json_pos(&j);
    if (r < 0 || j.why[0]) {
        const char *w = j.why, *pre = "header JSON: ";
        if (strncmp(w, pre, strlen(pre)) == 0) w += strlen(pre);
        snprintf(why, whylen, "not a JSON object of token ids: %s", w[0] ? w : "expected '{' or ','");
        return -1;
    }
    tg_json_skip_ws(&j);
    if (j.p != j.end) {
        snprintf(why, whylen, "text after the JSON object");
        return -1;
    }
    for (int id = 0; id < e->count; id++)
        if (!e->tok[id].len) {
            snprintf(why, whylen, "no token has id %d (%d ids)", id, e->count);
            return -1;
        }
    if (e->count < 256) {
        snprintf(why, whylen, "%d tokens, fewer than the 256 bytes", e->count);
        return -1;
    }
    return 0;
oom:
    snprintf(why, whylen, "out of memory");
    return -1;
}

tg_bpe *tg_bpe_load_gpt2(const char *encoder_json, const char *vocab_bpe) {
    if (!encoder_json || !vocab_bpe) {
        tg_set_error("bpe_load_gpt2: NULL %s", !encoder_json ? "encoder.json path" : "vocab.bpe path");
        return NULL;
    }
    unsigned char *ej = NULL, *vb = NULL;
    size_t ej_n, vb_n;
    id_list e = {0};
    tg_bpe *b = NULL;
    char why[512] = "";
    size_t at = 0;
    if (tg_read_file(encoder_json, "bpe_load_gpt2", &ej, &ej_n) != 0) return NULL;
    if (read_encoder(ej, ej_n, &e, why, sizeof why, &at) != 0) {
        tg_set_error("bpe_load_gpt2: %s:%ld: %s", encoder_json, line_of(ej, at), why);
        goto done;
    }
    if (tg_read_file(vocab_bpe, "bpe_load_gpt2", &vb, &vb_n) != 0) goto done;
    /* vocab.bpe: "#version: 0.2", then merge i on line i + 2 makes token 256 + i */
    int merges = 0;
    long line = 1;
    unsigned char raw[2][4096];
    size_t pos = 0;
    if (vb_n && vb[0] == '#') {
        while (pos < vb_n && vb[pos] != '\n') pos++;
        pos++;
        line++;
    }
    for (; pos < vb_n; line++) {
        size_t eol = pos;
        while (eol < vb_n && vb[eol] != '\n') eol++;
        if (eol == pos && eol + 1 >= vb_n) break; /* the file's last newline */
        const unsigned char *sp = memchr(vb + pos, ' ', eol - pos);
        long na = -1, nb = -1;
        if (sp && sp > vb + pos && sp + 1 < vb + eol && !memchr(sp + 1, ' ', (size_t)(vb + eol - sp - 1)) &&
            (size_t)(sp - vb - pos) < sizeof raw[0] && (size_t)(vb + eol - sp - 1) < sizeof raw[1]) {
            na = unmap(vb + pos, (size_t)(sp - vb - pos), raw[0]);
            nb = unmap(sp + 1, (size_t)(vb + eol - sp - 1), raw[1]);
        }
        if (na < 0 || nb < 0) {
            tg_set_error("bpe_load_gpt2: %s:%ld: expected a merge \"A B\" of two tokens in GPT-2's byte-to-unicode "
                         "alphabet, found \"%.*s\"",
                         vocab_bpe, line, (int)(eol - pos < 60 ? eol - pos : 60), (const char *)vb + pos);
            goto done;
        }
        int id = 256 + merges;
        const bpe_span *t = id < e.count ? &e.tok[id] : NULL;
        if (!t || t->len != (uint32_t)(na + nb) || memcmp(e.bytes + t->off, raw[0], (size_t)na) != 0 ||
            memcmp(e.bytes + t->off + na, raw[1], (size_t)nb) != 0) {
            tg_set_error("bpe_load_gpt2: %s:%ld: merge %d \"%.*s\" does not make token %d of %s", vocab_bpe, line,
                         merges, (int)(eol - pos < 60 ? eol - pos : 60), (const char *)vb + pos, id, encoder_json);
            goto done;
        }
        merges++;
        pos = eol + 1;
    }
    int n_ranks = 256 + merges, n_special = e.count - n_ranks;
    if (n_special > BPE_MAX_SPECIAL) {
        tg_set_error("bpe_load_gpt2: %s: %d tokens but %s has %d merges: %d tokens are neither bytes nor merges "
                     "(at most %d special tokens)",
                     encoder_json, e.count, vocab_bpe, merges, n_special, BPE_MAX_SPECIAL);
        goto done;
    }
    if (!(b = bpe_new(n_ranks))) goto oom;
    for (int id = 0; id < n_ranks; id++) {
        const unsigned char *s = e.bytes + e.tok[id].off;
        size_t len = e.tok[id].len;
        if (id < 256 && len != 1) {
            tg_set_error("bpe_load_gpt2: %s: id %d is \"%.*s\", not a single byte: ids 0..255 must be the bytes",
                         encoder_json, id, (int)len, (const char *)s);
            goto fail;
        }
        int dup = bpe_rank(b, s, len);
        if (dup >= 0) {
            tg_set_error("bpe_load_gpt2: %s: ids %d and %d are the same token", encoder_json, dup, id);
            goto fail;
        }
        if (bpe_set(b, id, s, len) != 0) goto oom;
    }
    for (int id = n_ranks; id < e.count; id++) {
        char name[64];
        size_t len = e.tok[id].len;
        if (len >= sizeof name) {
            tg_set_error("bpe_load_gpt2: %s: special token %d is longer than %zu bytes", encoder_json, id,
                         sizeof name - 1);
            goto fail;
        }
        memcpy(name, e.bytes + e.tok[id].off, len);
        name[len] = '\0';
        if (bpe_add_special(b, name) != 0) goto oom;
    }
    if (bpe_finish(b) != 0) goto oom; /* no byte is missing: ids 0..255 are 256 distinct bytes */
    goto done;
oom:
    tg_set_error("bpe_load_gpt2: %s: out of memory", encoder_json);
fail:
    tg_bpe_free(b);
    b = NULL;
done:
    tg_sys_free(e.tok);
    tg_sys_free(e.bytes);
    tg_sys_free(ej);
    tg_sys_free(vb);
    return b;
}

/* ---- tiktoken's rank format ----------------------------------------------------------
 * load_tiktoken_bpe / dump_tiktoken_bpe in tiktoken/load.py: per line,
 * base64(token bytes) (RFC 4648, with padding), one space, the rank in
 * decimal; written in rank order. */
static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(unsigned char c) {
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

/* Decodes s (len bytes) into out (room for len / 4 * 3); the count, or -1
 * unless len is a multiple of 4 with '=' padding only at the end and no
 * bits left over (RFC 4648's canonical encoding). */
static long b64_decode(const unsigned char *s, size_t len, unsigned char *out) {
    if (len == 0 || len % 4) return -1;
    long k = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int q = 0; q < 4; q++) {
            if (s[i + q] == '=' && i + 4 == len && q >= 2) {
                v[q] = 0;
                pad++;
            } else if (pad || (v[q] = b64_value(s[i + q])) < 0) {
                return -1;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if ((pad == 1 && (w & 0xFF)) || (pad == 2 && (w & 0xFFFF))) return -1; /* stray bits */
        out[k++] = (unsigned char)(w >> 16);
        if (pad < 2) out[k++] = (unsigned char)(w >> 8);
        if (pad < 1) out[k++] = (unsigned char)w;
    }
    return k;
}

tg_bpe *tg_bpe_parse_tiktoken(const unsigned char *buf, size_t size, const char *path) {
    if (!buf || !path) {
        tg_set_error("bpe_load_tiktoken: NULL %s", !buf ? "text" : "name");
        return NULL;
    }
    unsigned char *raw = NULL;
    /* first pass: check each line, remember the largest rank */
    tg_bpe *b = NULL;
    long line = 1, max_rank = -1;
    size_t longest = 0;
    for (size_t pos = 0; pos < size; line++) {
        size_t eol = pos;
        while (eol < size && buf[eol] != '\n') eol++;
        if (eol - pos > longest) longest = eol - pos;
        pos = eol + 1;
    }
    if (!(raw = tg_sys_alloc(longest + 1))) goto oom;
    for (int pass = 0; pass < 2; pass++) {
        long prev = -1;
        line = 1;
        for (size_t pos = 0; pos < size; line++) {
            size_t eol = pos;
            while (eol < size && buf[eol] != '\n') eol++;
            size_t next = eol + 1;
            if (eol > pos && buf[eol - 1] == '\r') eol--; /* CRLF lines, as tiktoken's splitlines() reads them */
            const unsigned char *s = buf + pos, *sp = memchr(s, ' ', eol - pos);
            if (eol == pos) { /* tiktoken skips empty lines */
                pos = next;
                continue;
            }
            long n = sp ? b64_decode(s, (size_t)(sp - s), raw) : -1;
            if (n < 0) {
                tg_set_error("bpe_load_tiktoken: %s:%ld: expected \"<base64 token> <rank>\", found \"%.*s\"", path,
                             line, (int)(eol - pos < 60 ? eol - pos : 60), (const char *)s);
                goto fail;
            }
            long rank = 0;
            const unsigned char *d = sp + 1;
            if (d == buf + eol) rank = -1;
            for (; d < buf + eol && rank >= 0; d++)
                rank = *d >= '0' && *d <= '9' && rank < MAX_RANK ? rank * 10 + (*d - '0') : -1;
            if (rank < 0 || rank >= MAX_RANK || (sp[1] == '0' && buf + eol - sp > 2)) {
                tg_set_error("bpe_load_tiktoken: %s:%ld: the rank \"%.*s\" is not a decimal number below %d", path,
                             line, (int)(buf + eol - sp - 1 < 20 ? buf + eol - sp - 1 : 20), (const char *)sp + 1,
                             MAX_RANK);
                goto fail;
            }
            if (rank <= prev) {
                tg_set_error("bpe_load_tiktoken: %s:%ld: rank %ld after rank %ld: ranks must increase", path, line,
                             rank, prev);
                goto fail;
            }
            /* A gap would be an id the model can sample that decodes to nothing. */
            if (rank != prev + 1) {
                tg_set_error("bpe_load_tiktoken: %s:%ld: rank %ld after %s%ld: ranks must be 0, 1, 2, ... without "
                             "gaps (id %ld would be no token)",
                             path, line, rank, prev < 0 ? "the start, expected " : "rank ", prev < 0 ? 0 : prev,
                             prev + 1);
                goto fail;
            }
            prev = rank;
            if (pass == 1) {
                int dup = bpe_rank(b, raw, (size_t)n);
                if (dup >= 0) {
                    tg_set_error("bpe_load_tiktoken: %s:%ld: the token of rank %ld has rank %d already", path, line,
                                 rank, dup);
                    goto fail;
                }
                if (bpe_set(b, (int)rank, raw, (size_t)n) != 0) goto oom;
            }
            pos = next;
        }
        max_rank = prev;
        if (pass == 0 && !(b = bpe_new((int)max_rank + 1))) goto oom;
    }
    int missing = bpe_finish(b);
    if (missing < 0) goto oom;
    if (missing) {
        tg_set_error("bpe_load_tiktoken: %s: byte 0x%02X is not a token: every single byte must be, so that any text "
                     "encodes",
                     path, missing - 1);
        goto fail;
    }
    if (bpe_add_special(b, TG_BPE_ENDOFTEXT) != 0) goto oom;
    tg_sys_free(raw);
    return b;
oom:
    tg_set_error("bpe_load_tiktoken: %s: out of memory", path);
fail:
    tg_bpe_free(b);
    tg_sys_free(raw);
    return NULL;
}

tg_bpe *tg_bpe_load_tiktoken(const char *path) {
    unsigned char *buf;
    size_t size;
    if (tg_read_file(path, "bpe_load_tiktoken", &buf, &size) != 0) return NULL;
    tg_bpe *b = tg_bpe_parse_tiktoken(buf, size, path);
    tg_sys_free(buf);
    return b;
}

char *tg_bpe_tiktoken_text(const tg_bpe *b, size_t *len) {
    if (!b || !len) {
        tg_set_error("bpe_tiktoken_text: NULL %s", !b ? "vocabulary" : "length");
        return NULL;
    }
    size_t cap = 1;
    for (int id = 0; id < b->n_ranks; id++) cap += (b->tok[id].len + 2) / 3 * 4 + 16; /* base64, " <rank>\n" */
    char *out = malloc(cap), line[32];
    size_t n = 0;
    for (int id = 0; out && id < b->n_ranks; id++) {
        const bpe_span *t = &b->tok[id];
        const unsigned char *s = b->bytes + t->off;
        if (!t->len) continue;                     /* a gap: that id does not decode */
        for (uint32_t i = 0; i < t->len; i += 3) { /* 3 bytes -> 4 characters */
            uint32_t left = t->len - i, w = (uint32_t)s[i] << 16;
            if (left > 1) w |= (uint32_t)s[i + 1] << 8;
            if (left > 2) w |= s[i + 2];
            out[n++] = b64[w >> 18], out[n++] = b64[w >> 12 & 63];
            out[n++] = left > 1 ? b64[w >> 6 & 63] : '=', out[n++] = left > 2 ? b64[w & 63] : '=';
        }
        int k = snprintf(line, sizeof line, " %d\n", id);
        memcpy(out + n, line, (size_t)k), n += (size_t)k;
    }
    if (!out) {
        tg_set_error("bpe_tiktoken_text: out of memory");
        return NULL;
    }
    out[n] = 0;
    *len = n;
    return out;
}

int tg_bpe_save_tiktoken(const tg_bpe *b, const char *path) {
    if (!b || !path) {
        tg_set_error("bpe_save_tiktoken: NULL %s", !b ? "vocabulary" : "path");
        return -1;
    }
    size_t n;
    char *text = tg_bpe_tiktoken_text(b, &n);
    tg_atomic_file af;
    if (!text || tg_atomic_begin(&af, path, "bpe_save_tiktoken") != 0) return free(text), -1;
    if (fwrite(text, 1, n, af.f) != n) {
        tg_set_error("bpe_save_tiktoken: %s: write failed", path);
        tg_atomic_abort(&af);
        free(text);
        return -1;
    }
    free(text);
    return tg_atomic_commit(&af, "bpe_save_tiktoken");
}

/* Where "gpt2" is when $TGRAD_GPT2_DIR is unset: the source tree's npm
 * folder when the program runs from the tree's root, else the installed
 * copy beside the program, PROGRAM_DIR/../share/tgrad/gpt2 (make install
 * puts it there; the program's own path, from /proc/self/exe, rather than a
 * prefix compiled in: the library is built before the prefix is chosen).
 * Writes the directory into dir (cap bytes); the source tree's when neither
 * holds the files, for the message. */
static void gpt2_dir(char *dir, size_t cap) {
    struct stat st;
    snprintf(dir, cap, "%s", TG_BPE_GPT2_DIR);
    if (stat(TG_BPE_GPT2_DIR "/encoder.json", &st) == 0) return;
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = 0;
    char cand[4200], file[4300];
    snprintf(cand, sizeof cand, "%s/../share/tgrad/gpt2", exe);
    snprintf(file, sizeof file, "%s/encoder.json", cand);
    if (stat(file, &st) == 0 && (size_t)snprintf(dir, cap, "%s", cand) >= cap)
        snprintf(dir, cap, "%s", TG_BPE_GPT2_DIR);
}

tg_bpe *tg_bpe_load(const char *spec) {
    char found[4200];
    if (!spec) {
        tg_set_error("bpe_load: NULL vocabulary");
        return NULL;
    }
    const char *dir = spec;
    struct stat st;
    if (strcmp(spec, "gpt2") == 0) {
        dir = getenv("TGRAD_GPT2_DIR");
        if (!dir || !*dir) gpt2_dir(found, sizeof found), dir = found;
    } else if (stat(spec, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return tg_bpe_load_tiktoken(spec);
    }
    size_t n = strlen(dir) + 16;
    char *enc = malloc(n), *merges = malloc(n);
    tg_bpe *b = NULL;
    if (enc && merges) {
        snprintf(enc, n, "%s/encoder.json", dir);
        snprintf(merges, n, "%s/vocab.bpe", dir);
        if (strcmp(spec, "gpt2") == 0 && stat(enc, &st) != 0)
            tg_set_error(
                "bpe_load: GPT-2's vocabulary is not in %s: run tools/install-tokenizer-deps.sh in tgrad's "
                "source tree (make install then copies it beside the installed programs), or set TGRAD_GPT2_DIR "
                "to a directory holding encoder.json and vocab.bpe",
                dir);
        else
            b = tg_bpe_load_gpt2(enc, merges);
    } else {
        tg_set_error("bpe_load: out of memory");
    }
    free(enc), free(merges);
    return b;
}
