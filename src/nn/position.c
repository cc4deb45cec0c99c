/* Position kinds (nn.h, tg_pe_kind): their names, parsing, and the checks
 * every attention module (encoder, decoder, MHA) makes of them, once. */
#include "module.h"

#include <string.h>

static const char *const PE_NAMES[] = {"fixed", "learned", "none", "relative", "rope", "alibi"};
#define N_PE ((int)(sizeof PE_NAMES / sizeof PE_NAMES[0]))

const char *tg_pe_kind_name(tg_pe_kind kind) { return (int)kind >= 0 && (int)kind < N_PE ? PE_NAMES[kind] : NULL; }

int tg_pe_kind_parse(const char *name, tg_pe_kind *out) {
    for (int k = 0; name && k < N_PE; k++)
        if (strcmp(name, PE_NAMES[k]) == 0) {
            *out = (tg_pe_kind)k;
            return 0;
        }
    tg_set_error("position kind '%s': expected fixed, learned, none, relative, rope or alibi", name ? name : "(NULL)");
    return -1;
}

int tg_pe_check(const char *op, tg_pe_kind kind, int head_dim) {
    if (!tg_pe_kind_name(kind)) {
        tg_set_error("%s: unknown position kind %d", op, (int)kind);
        return -1;
    }
    if (kind == TG_PE_ROPE && head_dim % 2 != 0) {
        tg_set_error("%s: RoPE rotates pairs of features: head size %d is odd", op, head_dim);
        return -1;
    }
    return 0;
}
