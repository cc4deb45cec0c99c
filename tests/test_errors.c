/* Bad input never crashes: the op returns NULL and records one message that
 * names the op and the shapes; a NULL input keeps the first message. */
#include <string.h>

#include "test_util.h"

static tg_tensor *t23, *t45, *t3;
static void setup(void) {
    tg_clear_error();
    t23 = tg_zeros(TG_SHAPE(2, 3));
    t45 = tg_zeros(TG_SHAPE(4, 5));
    t3 = tg_zeros(TG_SHAPE(3));
}
static void teardown(void) {
    tg_free(t23);
    tg_free(t45);
    tg_free(t3);
}
TestSuite(errors, .init = setup, .fini = teardown);

Test(errors, matmul_inner_dimensions) {
    cr_expect_null(tg_matmul(t23, t45));
    cr_expect_str_eq(tg_last_error(), "matmul: (2,3) @ (4,5): inner dimensions 3 and 4 differ");
    cr_expect_null(tg_matmul(t3, t3));
    cr_expect(error_has("matmul", "(3) @ (3)"), "%s", tg_last_error());
}

Test(errors, affine_shapes) {
    cr_expect_null(tg_affine(t23, t45, NULL)); /* x [2,3] needs weight [out, 3] */
    cr_expect(error_has("affine", "x (2,3), weight (4,5), bias NULL"), "%s", tg_last_error());
    cr_expect_null(tg_affine(t45, t45, t3)); /* bias (3) for out 4 */
    cr_expect(error_has("affine", "bias (3)"), "%s", tg_last_error());
    cr_expect_null(tg_affine(NULL, t45, NULL));
    cr_expect(error_has("affine", "NULL"), "%s", tg_last_error());
}

Test(errors, broadcast_mismatch) {
    cr_expect_null(tg_add(t23, t45));
    cr_expect_str_eq(tg_last_error(), "add: shapes (2,3) and (4,5) cannot be broadcast together");
}

Test(errors, null_input_keeps_first_message) {
    tg_tensor *bad = tg_matmul(t23, t45);
    tg_tensor *y = tg_exp(tg_sum(tg_add(bad, t23), 0, false));
    cr_expect_null(y);
    cr_expect(error_has("matmul: (2,3) @ (4,5)", NULL), "first message kept: %s", tg_last_error());
    tg_clear_error();
    cr_expect_null(tg_relu(NULL));
    cr_expect_str_eq(tg_last_error(), "relu: NULL input");
}

/* The message holds two paths of PATH_MAX (4096 on Linux) and a reason
 * whole: no message is cut mid-reason for a path the system accepts. */
Test(errors, message_holds_two_longest_paths) {
    static char a[4096], b[4096];
    memset(a, 'a', sizeof a - 1);
    memset(b, 'b', sizeof b - 1);
    const char *reason = "rename failed: the reason stays whole";
    tg_set_error("op: %s -> %s: %s", a, b, reason);
    const char *m = tg_last_error();
    size_t n = strlen(m), lr = strlen(reason);
    cr_expect_eq(n, strlen("op: ") + 4095 + strlen(" -> ") + 4095 + 2 + lr);
    cr_expect(n >= lr && strcmp(m + n - lr, reason) == 0, "the message is cut: ...%s", m + (n > 40 ? n - 40 : 0));
    /* A NULL input still keeps it. */
    cr_expect_null(tg_relu(NULL));
    cr_expect_eq(strlen(tg_last_error()), n);
}

Test(errors, axis_out_of_range) {
    cr_expect_null(tg_sum(t23, 2, false));
    cr_expect_str_eq(tg_last_error(), "sum: axis 2 out of range for shape (2,3)");
    cr_expect_null(tg_max(t23, -3, true));
    cr_expect_null(tg_transpose(t23, 0, 5));
    cr_expect(error_has("transpose", "(2,3)"));
    cr_expect_null(tg_slice(t23, 3, 0, 1));
    cr_expect_null(tg_concat(2, (tg_tensor *[]){t23, t23}, 2));
    cr_expect(error_has("concat", "axis 2"));
}

Test(errors, reshape_to_a_different_size) {
    cr_expect_null(tg_reshape(t23, TG_SHAPE(4, 2)));
    cr_expect_str_eq(tg_last_error(), "reshape: (2,3) to (4,2): 6 elements do not fit");
    cr_expect_null(tg_reshape(t23, TG_SHAPE(-1, 4)));
    cr_expect_null(tg_reshape(t23, TG_SHAPE(-1, -1)));
    cr_expect_not_null(tg_reshape(t23, TG_SHAPE(3, -1)));
}

Test(errors, slice_past_the_end) {
    cr_expect_null(tg_slice(t23, 1, 1, 4));
    cr_expect_str_eq(tg_last_error(), "slice: [1:4) along axis 1 of shape (2,3) is out of bounds");
    cr_expect_null(tg_slice(t23, 0, -1, 1));
    cr_expect_null(tg_slice(t23, 0, 2, 1));
}

Test(errors, gather_id_out_of_range) {
    cr_expect_null(tg_gather_rows(t23, (const int[]){0, 2}, TG_SHAPE(2)));
    cr_expect(error_has("gather_rows: id 2", "(2,3)"), "%s", tg_last_error());
    cr_expect_null(tg_gather_rows(t3, (const int[]){0}, TG_SHAPE(1)));
    cr_expect_null(tg_gather_rows(t23, (const int[]){-1}, TG_SHAPE(1)));
}

Test(errors, permute_and_concat_shapes) {
    cr_expect_null(tg_permute(t23, (const int[]){0, 0}));
    cr_expect(error_has("permute", "not a permutation"));
    cr_expect_null(tg_concat(2, (tg_tensor *[]){t23, t45}, 0));
    cr_expect_str_eq(tg_last_error(), "concat: shapes (2,3) and (4,5) differ outside axis 0");
    cr_expect_null(tg_concat(0, NULL, 0));
}

Test(errors, creation_and_softmax) {
    cr_expect_null(tg_zeros(TG_SHAPE(2, -1)));
    cr_expect(error_has("negative size", "(2,-1)"));
    cr_expect_null(tg_zeros(7, (const int[]){1, 1, 1, 1, 1, 1, 1}));
    tg_scope_begin();
    cr_expect_null(tg_softmax(tg_zeros(TG_SHAPE(2, 0))));
    tg_scope_end();
    cr_expect(error_has("softmax", "(2,0)"));
    cr_expect_null(tg_arange(0, 1, 0));
    cr_expect_null(tg_arange(0, NAN, 1)); /* was an empty tensor */
    cr_expect(error_has("arange", "must be finite"), "%s", tg_last_error());
    cr_expect_null(tg_arange(-INFINITY, 0, 1));
    cr_expect_null(tg_arange(0, 1, NAN));
    cr_expect_null(tg_view(t23, TG_SHAPE(5)));
}

Test(errors, matmul_batch_mismatch) {
    tg_tensor *a = tg_zeros(TG_SHAPE(2, 3, 4)), *b = tg_zeros(TG_SHAPE(3, 4, 5));
    cr_expect_null(tg_matmul(a, b));
    cr_expect_str_eq(tg_last_error(), "matmul: (2,3,4) @ (3,4,5): batch sizes 2 and 3 differ");
    cr_expect_null(tg_matmul_t(a, b, false, true));
    cr_expect(error_has("(3,4,5)^T", "inner dimensions 4 and 5"), "%s", tg_last_error());
    tg_free(a);
    tg_free(b);
}

/* Issue 10, defect 2: (2^20, 2^20, 2^24) overflowed int64 in the size check
 * and came back as a tensor of size 0 (printing it then crashed). The
 * product is now checked before each multiplication, also past a zero. */
Test(errors, shape_size_overflow_is_rejected_before_multiplying) {
    tg_tensor *t = tg_zeros(TG_SHAPE(1 << 20, 1 << 20, 1 << 24));
    cr_assert_null(t);
    cr_assert(strstr(tg_last_error(), "too large"), "got: %s", tg_last_error());
    cr_assert_null(tg_zeros(TG_SHAPE(0, 1 << 30, 1 << 30, 1 << 30)), "strides would overflow past a zero");
    cr_assert_null(tg_empty(6, (int[]){1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30, 1 << 30}));
    tg_tensor *ok = tg_zeros(TG_SHAPE(0, 5));
    cr_assert_not_null(ok);
    cr_assert_eq(ok->size, 0);
    tg_free(ok);
}
