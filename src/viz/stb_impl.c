/* The one translation unit that compiles the stb implementations the viz
 * layer uses (Debian's libstb-dev ships them as single headers):
 *   stb_image_write  PNG encoding
 *   stb_truetype     glyph rasterisation
 * The library exports tg_* symbols only (see the Makefile), so these stay
 * private to it and a program may compile its own copies of stb beside it.
 * Their code is not ours to fix, so their warnings are silenced here only.
 * (Under /usr/include they count as system headers and gcc 12 / clang 14
 * say nothing anyway; the pragmas keep the build warning-free when the
 * headers come from elsewhere through -I, or with a newer compiler.) */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wcast-qual"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wpedantic"
#endif

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#define STB_TRUETYPE_IMPLEMENTATION
#include <stb/stb_truetype.h>

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
