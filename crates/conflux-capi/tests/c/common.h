/* Shared by the C test programs: status checks that print conflux's reason, small-integer
 * data (so float results are exact), and plain reference loops for NCHW 2-D convolutions. */
#ifndef CONFLUX_TEST_COMMON_H
#define CONFLUX_TEST_COMMON_H

#include <miopen/miopen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        miopenStatus_t st_ = (call);                                                     \
        if(st_ != miopenStatusSuccess) {                                                 \
            fprintf(stderr, "%s:%d: %s -> %s\n  reason: %s\n", __FILE__, __LINE__, #call, \
                    miopenGetErrorString(st_), confluxGetLastErrorMessage());            \
            exit(1);                                                                     \
        }                                                                                \
    } while(0)

/* The call must fail with exactly `want`. */
#define EXPECT_STATUS(want, call)                                                        \
    do {                                                                                 \
        miopenStatus_t st_ = (call);                                                     \
        if(st_ != (want)) {                                                              \
            fprintf(stderr, "%s:%d: %s -> %s, expected %s\n  reason: %s\n", __FILE__,    \
                    __LINE__, #call, miopenGetErrorString(st_), miopenGetErrorString(want), \
                    confluxGetLastErrorMessage());                                       \
            exit(1);                                                                     \
        }                                                                                \
    } while(0)

#define REQUIRE(cond)                                                                    \
    do {                                                                                 \
        if(!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                     \
        }                                                                                \
    } while(0)

/* Deterministic small integers in [-range, range]. */
static void fill_ints(float* v, size_t n, unsigned seed, int range)
{
    unsigned s = seed * 2654435761u + 1u;
    size_t i;
    for(i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        v[i] = (float)((int)((s >> 16) % (unsigned)(2 * range + 1)) - range);
    }
}

static float* alloc_floats(size_t n)
{
    float* p = (float*)calloc(n, sizeof(float));
    REQUIRE(p != NULL);
    return p;
}

/* Largest |a - b| / (1 + |b|) over n values; exact data should give 0. */
static double max_rel_err(const float* a, const float* b, size_t n)
{
    double worst = 0.0;
    size_t i;
    for(i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if(e > worst || a[i] != a[i])
            worst = (a[i] != a[i]) ? 1e30 : e;
    }
    return worst;
}

#define EXPECT_CLOSE(got, want, n, tol)                                                  \
    do {                                                                                 \
        double e_ = max_rel_err((got), (want), (n));                                     \
        if(e_ > (tol)) {                                                                 \
            fprintf(stderr, "%s:%d: %s vs %s: max relative error %g > %g\n", __FILE__,   \
                    __LINE__, #got, #want, e_, (double)(tol));                           \
            exit(1);                                                                     \
        }                                                                                \
    } while(0)

/* 2-D convolution geometry (NCHW, packed, one group). */
typedef struct
{
    int n, c, h, w;  /* input */
    int k, r, s;     /* filter K x C x R x S */
    int pad, stride, dil;
    int oh, ow;      /* output */
} conv_geom;

static conv_geom geom(int n, int c, int h, int w, int k, int r, int s, int pad, int stride, int dil)
{
    conv_geom g;
    g.n = n; g.c = c; g.h = h; g.w = w; g.k = k; g.r = r; g.s = s;
    g.pad = pad; g.stride = stride; g.dil = dil;
    g.oh = (h + 2 * pad - (dil * (r - 1) + 1)) / stride + 1;
    g.ow = (w + 2 * pad - (dil * (s - 1) + 1)) / stride + 1;
    return g;
}

#define XI(g, n_, c_, h_, w_) ((((size_t)(n_) * (g).c + (c_)) * (g).h + (h_)) * (g).w + (w_))
#define WI(g, k_, c_, r_, s_) ((((size_t)(k_) * (g).c + (c_)) * (g).r + (r_)) * (g).s + (s_))
#define YI(g, n_, k_, h_, w_) ((((size_t)(n_) * (g).k + (k_)) * (g).oh + (h_)) * (g).ow + (w_))

/* Calls f(n, k, oh, ow, c, r, s, ih, iw) for every in-range tap. */
#define FOR_TAPS(g, BODY)                                                                \
    {                                                                                    \
        int n, k, oh, ow, c, r, s;                                                       \
        for(n = 0; n < (g).n; n++)                                                       \
            for(k = 0; k < (g).k; k++)                                                   \
                for(oh = 0; oh < (g).oh; oh++)                                           \
                    for(ow = 0; ow < (g).ow; ow++)                                       \
                        for(c = 0; c < (g).c; c++)                                       \
                            for(r = 0; r < (g).r; r++)                                   \
                                for(s = 0; s < (g).s; s++) {                             \
                                    int ih = oh * (g).stride - (g).pad + r * (g).dil;    \
                                    int iw = ow * (g).stride - (g).pad + s * (g).dil;    \
                                    if(ih < 0 || ih >= (g).h || iw < 0 || iw >= (g).w)   \
                                        continue;                                        \
                                    BODY;                                                \
                                }                                                        \
    }

/* y = conv(x, w) */
static void ref_conv_fwd(conv_geom g, const float* x, const float* w, float* y)
{
    memset(y, 0, sizeof(float) * (size_t)g.n * g.k * g.oh * g.ow);
    FOR_TAPS(g, y[YI(g, n, k, oh, ow)] += x[XI(g, n, c, ih, iw)] * w[WI(g, k, c, r, s)])
}

/* dx = conv_bwd_data(dy, w) */
static void ref_conv_bwd_data(conv_geom g, const float* dy, const float* w, float* dx)
{
    memset(dx, 0, sizeof(float) * (size_t)g.n * g.c * g.h * g.w);
    FOR_TAPS(g, dx[XI(g, n, c, ih, iw)] += dy[YI(g, n, k, oh, ow)] * w[WI(g, k, c, r, s)])
}

/* dw = conv_bwd_weights(x, dy) */
static void ref_conv_bwd_weights(conv_geom g, const float* x, const float* dy, float* dw)
{
    memset(dw, 0, sizeof(float) * (size_t)g.k * g.c * g.r * g.s);
    FOR_TAPS(g, dw[WI(g, k, c, r, s)] += x[XI(g, n, c, ih, iw)] * dy[YI(g, n, k, oh, ow)])
}

static size_t x_count(conv_geom g) { return (size_t)g.n * g.c * g.h * g.w; }
static size_t w_count(conv_geom g) { return (size_t)g.k * g.c * g.r * g.s; }
static size_t y_count(conv_geom g) { return (size_t)g.n * g.k * g.oh * g.ow; }

/* Descriptors of the geometry's x, w, y (packed NCHW float). */
static void make_descs(conv_geom g, miopenTensorDescriptor_t* x, miopenTensorDescriptor_t* w,
                       miopenTensorDescriptor_t* y, miopenConvolutionDescriptor_t* conv)
{
    CHECK(miopenCreateTensorDescriptor(x));
    CHECK(miopenCreateTensorDescriptor(w));
    CHECK(miopenCreateTensorDescriptor(y));
    CHECK(miopenCreateConvolutionDescriptor(conv));
    CHECK(miopenSet4dTensorDescriptor(*x, miopenFloat, g.n, g.c, g.h, g.w));
    CHECK(miopenSet4dTensorDescriptor(*w, miopenFloat, g.k, g.c, g.r, g.s));
    CHECK(miopenSet4dTensorDescriptor(*y, miopenFloat, g.n, g.k, g.oh, g.ow));
    CHECK(miopenInitConvolutionDescriptor(*conv, miopenConvolution, g.pad, g.pad, g.stride,
                                          g.stride, g.dil, g.dil));
}

#endif
