/* seq_layers_dump: writes a safetensors file with the parameters of a
 * Conv1d (k 3), a dilated Conv1d (k 4, dilation 2), a 2-layer RNN and a
 * 2-layer GRU, an input x [2, 7, 5], each module's output y and the
 * gradients of L = sum(y^2) / 2 with respect to x and to every parameter
 * ("grad." + name). bench/torch_seq_layers.py loads the weights into
 * torch.nn.Conv1d / RNN / GRU and compares outputs and gradients. */
#include "cli.h"
#include "tgrad.h"

int main(int argc, char **argv) {
    const char *out = "seq_layers.safetensors";
    int seed = 1;
    cli_opt opts[] = {
        {"out", CLI_STR, &out, "safetensors file to write", 0, 0},
        {"seed", CLI_INT, &seed, "random seed", 0, 2e9},
    };
    cli_parse(argc, argv, "[options]", "Dumps Conv1d/RNN/GRU weights, outputs and gradients for the torch check.", opts,
              2, NULL, 0);
    tg_rng rng = tg_rng_new((uint64_t)seed);
    const int in = 5, hid = 6;
    tg_conv1d *c1 = tg_conv1d_new(in, hid, 3, 1, true, &rng), *c2 = tg_conv1d_new(in, hid, 4, 2, true, &rng);
    tg_rnn *r = tg_rnn_new(in, hid, 2, &rng);
    tg_gru *g = tg_gru_new(in, hid, 2, &rng);
    tg_tensor *x = tg_randn(TG_SHAPE(2, 7, in), &rng);
    tg_params all, mods[4];
    tg_params_init(&all);
    const char *names[4] = {"conv", "conv_dil", "rnn", "gru"};
    for (int i = 0; i < 4; i++) tg_params_init(&mods[i]);
    int status = 1; /* every path below ends at done, which frees all (a failed save once leaked) */
    if (!c1 || !c2 || !r || !g || !x) goto done;
    tg_set_requires_grad(x, true);
    tg_conv1d_params(c1, &mods[0], "conv");
    tg_conv1d_params(c2, &mods[1], "conv_dil");
    tg_rnn_params(r, &mods[2], "rnn");
    tg_gru_params(g, &mods[3], "gru");
    tg_params_add(&all, "", "x", x);
    for (int i = 0; i < 4; i++) {
        tg_params_extend(&all, "", &mods[i]);
        tg_zero_grad(x);
        tg_tensor *y = i == 0   ? tg_conv1d_forward(c1, x)
                       : i == 1 ? tg_conv1d_forward(c2, x)
                       : i == 2 ? tg_rnn_forward(r, x)
                                : tg_gru_forward(g, x);
        if (!y || tg_backward(tg_mul_scalar(tg_sum_all(tg_mul(y, y)), 0.5)) != 0) goto done;
        char nm[64];
        snprintf(nm, sizeof nm, "y.%s", names[i]);
        tg_params_add(&all, "", nm, tg_clone(y));
        snprintf(nm, sizeof nm, "grad_x.%s", names[i]);
        tg_params_add(&all, "", nm, tg_clone(x->grad));
        for (int j = 0; j < mods[i].n; j++)
            tg_params_add(&all, "grad", mods[i].items[j].name, mods[i].items[j].t->grad);
    }
    if (tg_checkpoint_save(out, &all, NULL) != 0) goto done;
    printf("wrote %s (%d tensors)\n", out, all.n);
    status = 0;
done:
    if (status != 0) fprintf(stderr, "seq_layers_dump: %s\n", tg_last_error());
    /* the clones (y.*, grad_x.*) are the only tensors "all" owns */
    for (int i = 0; i < all.n; i++)
        if (!strncmp(all.items[i].name, "y.", 2) || !strncmp(all.items[i].name, "grad_x.", 7)) tg_free(all.items[i].t);
    tg_params_free(&all);
    for (int i = 0; i < 4; i++) tg_params_free(&mods[i]);
    tg_free(x);
    tg_conv1d_free(c1);
    tg_conv1d_free(c2);
    tg_rnn_free(r);
    tg_gru_free(g);
    tg_release_all();
    return status;
}
