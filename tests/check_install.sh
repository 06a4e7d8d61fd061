#!/bin/sh
# meson install --destdir into a scratch root, then compile, link and run a C program outside
# the tree with `pkg-config --cflags --libs ragjit`.
set -eu
builddir=$1 srcdir=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$builddir" --destdir "$root" --no-rebuild --quiet >/dev/null
pc=$(find "$root" -name ragjit.pc | head -n 1)
[ -n "$pc" ] || { echo "ragjit.pc was not installed"; exit 1; }
prefix=$(sed -n 's/^prefix=//p' "$pc")
export PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --define-variable=prefix="$root$prefix" --cflags --libs ragjit)
cat > "$root/ext.c" <<'C'
#include <ragjit.h>
#include <stdio.h>
int main(void) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 2, (rj_dim[]){B, J});
    rj_node s = rj_graph_reduce(g, RJ_OP_SUM, rj_graph_unary(g, RJ_OP_EXP, x), 1, false);
    rj_graph_output(g, s, "s");
    rj_program *p = rj_program_new(g, RJ_TARGET_REFERENCE);
    rj_bind *b = rj_bind_new(p);
    float v[3] = {0, 0, 0};
    int64_t off[3] = {0, 1, 3};
    rj_bind_offsets(b, J, 2, off, NULL);
    rj_bind_input(b, x, v, 3);
    if (rj_program_run(p, b) != RJ_OK) { puts(rj_ctx_error(ctx)); return 1; }
    rj_tensor_info info;
    rj_tensor_get_info(rj_bind_result(b, s), &info);
    printf("%g %g\n", ((float *)info.values)[0], ((float *)info.values)[1]);
    rj_bind_free(b); rj_program_free(p); rj_graph_free(g); rj_ctx_free(ctx);
    return 0;
}
C
cc -std=c11 -Wall -Werror "$root/ext.c" -o "$root/ext" $flags
libdir=$(dirname "$(find "$root" -name 'libragjit.so*' | head -n 1)")
out=$(LD_LIBRARY_PATH=$libdir "$root/ext")
[ "$out" = "1 2" ] || { echo "external program printed '$out', expected '1 2'"; exit 1; }
echo "installed to a destdir; external program built with: $flags"
