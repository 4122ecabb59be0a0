// oneDNN peer for conflux's CPU int8 convolutions: forward inference with s8 x and w and an f32
// y (what `conflux-driver convint8` runs), timed as bench_cpu times conflux (warm-up, then
// individually timed runs), reporting the median and the minimum.
//
// usage: dnnl_int8 <N> <min_reps> <target_s> <cfg> [<cfg> ...]   -> CSV rows
//   cfg = C-H-W-K-fy-fx-py-px[-sy-sx-g-dy-dx] (stride, groups, dilation as in MIOpen)
//   row: cfg,N,variant,impl,median_us,min_us,gflops(median)
// Variants: "any" (format_tag::any: oneDNN picks its layouts; x and w are reordered into them
// once, outside the timing) and "nhwc" (activations channels-last, weights any).
// Built against the oneDNN 2.x API (Debian bookworm: 2.6.3):
//   g++ -O2 -std=c++17 -fopenmp dnnl_int8.cpp -o dnnl_int8 -ldnnl
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Cfg {
    long c, h, w, k, fy, fx, py, px, sy = 1, sx = 1, g = 1, dy = 1, dx = 1;
    std::string text;
};

static Cfg parse(const std::string& s) {
    std::vector<long> v;
    std::stringstream ss(s);
    for (std::string t; std::getline(ss, t, '-');) v.push_back(std::atol(t.c_str()));
    if (v.size() != 8 && v.size() != 13) throw std::runtime_error("cfg needs 8 or 13 fields: " + s);
    Cfg c{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    if (v.size() == 13) { c.sy = v[8]; c.sx = v[9]; c.g = v[10]; c.dy = v[11]; c.dx = v[12]; }
    c.text = s;
    return c;
}

// Median and minimum (µs) of individually timed runs after a warm-up.
static std::pair<double, double> time_us(const std::function<void()>& f, stream& s, int min_reps, double target) {
    auto now = [] { return std::chrono::steady_clock::now(); };
    auto t0 = now();
    for (int i = 0; i < 5 || std::chrono::duration<double>(now() - t0).count() < 0.1; ++i) { f(); s.wait(); }
    std::vector<double> t;
    auto start = now();
    while ((int)t.size() < min_reps || std::chrono::duration<double>(now() - start).count() < target) {
        auto a = now();
        f();
        s.wait();
        t.push_back(std::chrono::duration<double, std::micro>(now() - a).count());
        if (t.size() > 100000) break;
    }
    std::sort(t.begin(), t.end());
    return {t[t.size() / 2], t[0]};
}

int main(int argc, char** argv) try {
    if (argc < 5) { std::fprintf(stderr, "usage: see the header of dnnl_int8.cpp\n"); return 2; }
    const long n = std::atol(argv[1]);
    const int min_reps = std::atoi(argv[2]);
    const double target = std::atof(argv[3]);
    engine eng(engine::kind::cpu, 0);
    stream s(eng);
    std::printf("cfg,N,variant,impl,median_us,min_us,gflops\n");
    for (int i = 4; i < argc; ++i) {
        Cfg c = parse(argv[i]);
        const long oh = (c.h + 2 * c.py - c.dy * (c.fy - 1) - 1) / c.sy + 1, ow = (c.w + 2 * c.px - c.dx * (c.fx - 1) - 1) / c.sx + 1;
        const double gflop = 2.0 * n * c.k * oh * ow * (c.c / c.g) * c.fy * c.fx * 1e-9;
        memory::dims x_d = {n, c.c, c.h, c.w}, y_d = {n, c.k, oh, ow};
        memory::dims w_d = c.g > 1 ? memory::dims{c.g, c.k / c.g, c.c / c.g, c.fy, c.fx} : memory::dims{c.k, c.c, c.fy, c.fx};
        memory::dims strides = {c.sy, c.sx}, dil = {c.dy - 1, c.dx - 1}, pad = {c.py, c.px};
        memory::dims pad_r = {(oh - 1) * c.sy + c.dy * (c.fy - 1) + 1 - c.h - c.py, (ow - 1) * c.sx + c.dx * (c.fx - 1) + 1 - c.w - c.px};
        for (const char* variant : {"any", "nhwc"}) {
            const tag act = std::string(variant) == "any" ? tag::any : tag::nhwc;
            memory::desc xm(x_d, dt::s8, act), ym(y_d, dt::f32, act), wm(w_d, dt::s8, tag::any);
            auto d = convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, xm, wm, ym, strides, dil, pad, pad_r);
            auto pd = convolution_forward::primitive_desc(d, eng);
            auto filled = [&](const memory::desc& md) {
                memory m(md, eng);
                signed char* p = (signed char*)m.get_data_handle();
                for (size_t j = 0; j < md.get_size(); ++j) p[j] = (signed char)((j * 2654435761u) >> 24);
                return m;
            };
            memory x = filled(pd.src_desc()), w = filled(pd.weights_desc()), y(pd.dst_desc(), eng);
            convolution_forward conv(pd);
            auto [med, mn] = time_us([&] { conv.execute(s, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}}); }, s, min_reps, target);
            std::printf("%s,%ld,%s,%s,%.1f,%.1f,%.1f\n", c.text.c_str(), n, variant, pd.impl_info_str(), med, mn, gflop / med * 1e6);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "dnnl_int8: %s\n", e.what());
    return 1;
}
