/** @file
 * tgrad viz: heatmaps and line plots written as PNG files.
 *
 * This layer stands alone: it takes plain float arrays (row-major, with
 * their sizes) and knows nothing of tensors, so it can be lifted into
 * another project with its own directory. It needs Debian's stb headers
 * (libstb-dev) and, for good-looking text, the DejaVu Sans font
 * (fonts-dejavu-core); without the font it falls back to a small built-in
 * bitmap font, so figures always carry their labels.
 *
 * Errors: every function that returns int returns 0 on success and -1 on
 * error; none aborts or exits. On error it records one message naming the
 * function and the sizes, read with tg_viz_last_error(). The message is per thread and
 * stays until the next error or tg_viz_clear_error().
 *
 * Files are written atomically: to a temporary `<path>.tmp.<pid>.XXXXXX`
 * beside the target first (made by mkstemp, so concurrent writers never share
 * one), then rename()d over `<path>`, so a failed write never leaves a
 * half-written PNG in place of a good one. Temporaries left by a writer that
 * no longer runs are removed by the next write of the same path.
 *
 * Non-finite values (NaN, +-inf) are drawn grey and left out of the colour
 * scale (heatmaps) or break the line (line plots).
 */
#ifndef TG_VIZ_H
#define TG_VIZ_H

/* ---- errors ---------------------------------------------------------------- */
/** The calling thread's last viz error message, or NULL when none. The
 * string belongs to viz (a per-thread buffer, overwritten by the thread's
 * next error). */
const char *tg_viz_last_error(void);
/** Forgets the calling thread's error message: tg_viz_last_error() then
 * returns NULL. */
void tg_viz_clear_error(void);

/* ---- fonts ------------------------------------------------------------------ */
/** The default font file: DejaVu Sans from fonts-dejavu-core. */
#define TG_VIZ_DEFAULT_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
/** Text uses this TrueType file (default: TG_VIZ_DEFAULT_FONT). NULL
 * restores the default; "" forces the built-in bitmap font, as does a file
 * that cannot be read when a figure is drawn. The path is copied. Returns 0,
 * or -1 with the error recorded if the path is 4096 bytes or longer.
 * A process-wide setting: set it before drawing, not while other threads draw. */
int tg_viz_set_font(const char *ttf_path);

/* ---- heatmaps --------------------------------------------------------------- */
/** Colour maps of heatmaps (the same colour stops as matplotlib's), linearly
 * interpolated; t = 0 is the low end, 1 the high end. */
typedef enum {
    TG_CMAP_BLUES,  /**< sequential, white -> dark blue (attention weights) */
    TG_CMAP_REDS,   /**< sequential, white -> dark red */
    TG_CMAP_RDBU,   /**< diverging, red (low) -> white -> blue (high) */
    TG_CMAP_VIRIDIS /**< perceptually uniform, dark purple -> yellow */
} tg_cmap;

/** Options of tg_viz_heatmap and tg_viz_heatmap_grid. All fields may be
 * zero: a zeroed struct gives an untitled Blues heatmap with automatic
 * sizes. Passing NULL for the options means the same. NULL or "" strings
 * draw nothing. */
typedef struct {
    const char *title;    /**< above the figure; NULL = none */
    const char *xlabel;   /**< under each panel of the bottom row */
    const char *ylabel;   /**< beside each panel of the left column, rotated */
    tg_cmap cmap;         /**< the colour map; 0 = TG_CMAP_BLUES; an unknown value is an error */
    int shared_scale;     /**< grids: 1 = one scale and one colour bar for all
                              panels; 0 = each panel its own scale and bar */
    int cell_px;          /**< pixels per matrix cell; 0 = auto (a 16x16 or
                              60x32 matrix gets a ~300-420 px plot, a 512x512
                              matrix is box-filtered down to 420 px) */
    int symmetric;        /**< 0 = auto (diverging maps centre 0, i.e. the
                              scale is [-m, m] with m = max |v|);
                              1 = always centre 0; -1 = never, use [min, max] */
    int titles_per_panel; /**< grids: 0 = panel_titles holds grid_cols strings,
                              one per column, drawn above the top row (as in
                              d2l's show_heatmaps); 1 = grid_rows * grid_cols
                              strings, one above each panel */
} tg_heatmap_opts;

/** One heatmap of data[rows * cols] (row-major, row 0 at the top), with
 * ticks, labels, title and a colour bar, written to png_path. o may be NULL
 * (defaults). Returns 0, or -1 with the error recorded (e.g. rows or cols
 * not positive, NULL data or path, an unknown cmap, an image over 16384
 * pixels a side, a write failure). */
int tg_viz_heatmap(const char *png_path, const float *data, int rows, int cols, const tg_heatmap_opts *o);

/** A grid_rows x grid_cols grid (each 1..64) of heatmaps, each of size
 * rows x cols; mats[i * grid_cols + j] is the panel in grid row i, grid
 * column j. panel_titles may be NULL, and so may any string in it (see
 * tg_heatmap_opts::titles_per_panel for how many it holds). Returns 0, or
 * -1 with the error recorded, as tg_viz_heatmap. */
int tg_viz_heatmap_grid(const char *png_path, int grid_rows, int grid_cols, const float *const *mats, int rows,
                        int cols, const char *const *panel_titles, const tg_heatmap_opts *o);

/** Geometry, for callers and tests that need to find a cell in the image:
 * a rectangle in pixels, x and y counted from the image's top-left corner.
 * Cell (r, c) of a panel covers plot.x + c * plot.w / cols ... and
 * plot.y + r * plot.h / rows ...; its centre is at
 * (plot.x + (c + 0.5) * plot.w / cols, plot.y + (r + 0.5) * plot.h / rows). */
typedef struct {
    int x, /**< left edge */ y, /**< top edge */ w, /**< width */ h; /**< height */
} tg_viz_rect;

/** Image size and plot rectangle of tg_viz_heatmap called with the same
 * arguments, computed without drawing. width, height and plot may each be
 * NULL. Returns 0, or -1 with the error recorded for sizes or options
 * tg_viz_heatmap would refuse. */
int tg_viz_heatmap_geometry(int rows, int cols, const tg_heatmap_opts *o, int *width, int *height, tg_viz_rect *plot);

/** Image size and the plot rectangle of each panel (plots[i * grid_cols + j],
 * an array of grid_rows * grid_cols; may be NULL) of tg_viz_heatmap_grid
 * called with the same arguments. Returns 0 or -1, as
 * tg_viz_heatmap_geometry. */
int tg_viz_heatmap_grid_geometry(int grid_rows, int grid_cols, int rows, int cols, const char *const *panel_titles,
                                 const tg_heatmap_opts *o, int *width, int *height, tg_viz_rect *plots);

/** The colour of map cmap at t in [0, 1] (clamped; NaN gives the grey used
 * for missing values), as 8-bit sRGB into rgb. An unknown cmap gives
 * TG_CMAP_BLUES's colours. */
void tg_viz_cmap_color(tg_cmap cmap, double t, unsigned char rgb[3]);

/* ---- line plots ------------------------------------------------------------ */
/** One line of tg_viz_lineplot: n points (x[i], y[i]). A non-finite point
 * breaks the line. */
typedef struct {
    const char *label; /**< legend entry; NULL = not in the legend */
    const float *x;    /**< NULL = 0, 1, ..., n-1 */
    const float *y;    /**< n values; may be NULL only when n is 0 */
    int n;             /**< the number of points, >= 0 (0: nothing drawn) */
} tg_series;

/** Options of tg_viz_lineplot; a zeroed struct, or NULL, gives an untitled
 * 640 x 420 plot with a linear y axis. NULL or "" strings draw nothing;
 * width or height 0 means 640 or 420, a negative one is an error. */
typedef struct {
    const char *title, /**< above the plot */ *xlabel, /**< under the x axis */ *ylabel; /**< by the y axis, rotated */
    int log_y;                                       /**< 1 = logarithmic y axis; y <= 0 breaks the line */
    int width, /**< image width in pixels */ height; /**< image height in pixels */
} tg_plot_opts;

/** Several series as lines in distinct colours (matplotlib's tab10 order),
 * with axes, grid, tick numbers, axis labels, title and a legend. The
 * legend never covers data: it goes in the first corner of the plot area
 * where it hides no point or line, else outside it, on the right (or below
 * when taller than the plot area), and then the image is wider (or taller)
 * than width x height by the legend's size. Returns 0, or -1 with the error
 * recorded (e.g. no series, a negative n, NULL y or path, an image too
 * small to hold a 40 x 40 plot area, a write failure). */
int tg_viz_lineplot(const char *png_path, const tg_series *series, int n_series, const tg_plot_opts *o);

/** The colour given to series i (cycles through 10 colours), as 8-bit sRGB
 * into rgb. */
void tg_viz_series_color(int i, unsigned char rgb[3]);

/* ---- the run report: one self-contained HTML page --------------------------- */
/** A named part of the page's data: json is its JSON text, as the page's
 * script (src/viz/report/report.js) reads it:
 *
 *     settings   {"name": "value", ...}
 *     metrics    {"step": [..], "loss": [..], "lr": [..], "val_step": [..], "val_loss": [..]}
 *     attention  {"tokens": ["text", ..], "layers": L, "heads": H, "pe": "kind",
 *                 "w": [L*H arrays (layer-major) of T rows: the weights of query i over keys 0..]}
 *     positions  [{"kind": "heatmap", "title", "xlabel", "ylabel", "rows", "cols", "data": [..]}
 *                 | {"kind": "lines", "title", "xlabel", "ylabel", "x": [..], "series": [{"name", "y"}]}]
 *     table      [{"title", "xlabel", "ylabel", "x": [..], "series": [{"name", "y": [.. or null]}]}, ..]
 *     samples    [{"step": s, "text": "..."}]
 *
 * Parts with other names are embedded and ignored by the page. The JSON is
 * not validated here (the page says when it cannot parse it). */
typedef struct {
    const char *name; /**< a lower-case identifier (letters a-z and '_'), not "title" */
    const char *json; /**< the part's JSON text, not empty */
} tg_viz_report_part;

/** Writes the page to html_path (atomically): the title, the parts' data
 * and the page's own CSS and JavaScript, all in one file that a browser
 * opens from file:// with no network (its Content-Security-Policy forbids
 * any fetch). A section is drawn for each part present. title NULL gives
 * "Run report". Returns 0, or -1 with the error recorded (e.g. NULL path, a
 * bad part name, a part without JSON, a write failure). */
int tg_viz_report(const char *html_path, const char *title, const tg_viz_report_part *parts, int n_parts);

#endif
