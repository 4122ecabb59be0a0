// oneDNN peer for the CPU backward convolutions (fp32): backward-data and backward-weights
// primitives on one problem list, timed the way bench_cpu times conflux (median of individually
// timed runs after a warm-up), so `bench_cpu bwd` can put both in one table.
//
// usage: dnnl_bwd <N> <min_reps> <target_s> <cfg> [<cfg> ...]   -> CSV rows
//   cfg = C-H-W-K-fy-fx-py-px[-sy-sx-g-dy-dx] (stride, groups, dilation as in MIOpen; 1 = dense)
//   row: cfg,N,direction,variant,median_us,gflops
// Variants: "any" (format_tag::any everywhere: oneDNN picks its layouts; tensors are reordered
// into them once, outside the timing, as a framework keeping oneDNN layouts would) and "nchw"
// (activations forced to plain NCHW, weights any). Weights are reordered outside the timing.
// Built against the oneDNN 2.x API (Debian bookworm: 2.6.3):
//   g++ -O2 -std=c++17 -fopenmp dnnl_bwd.cpp -o dnnl_bwd -ldnnl
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
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

static double median_us(const std::function<void()>& f, stream& s, int min_reps, double target) {
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
    return t[t.size() / 2];
}

int main(int argc, char** argv) try {
    if (argc < 5) { std::fprintf(stderr, "usage: see the header of dnnl_bwd.cpp\n"); return 2; }
    const long n = std::atol(argv[1]);
    const int min_reps = std::atoi(argv[2]);
    const double target = std::atof(argv[3]);
    engine eng(engine::kind::cpu, 0);
    stream s(eng);
    std::printf("cfg,N,direction,variant,median_us,gflops\n");
    for (int i = 4; i < argc; ++i) {
        Cfg c = parse(argv[i]);
        const long oh = (c.h + 2 * c.py - c.dy * (c.fy - 1) - 1) / c.sy + 1, ow = (c.w + 2 * c.px - c.dx * (c.fx - 1) - 1) / c.sx + 1;
        const double gflop = 2.0 * n * c.k * oh * ow * (c.c / c.g) * c.fy * c.fx * 1e-9;
        memory::dims x_d = {n, c.c, c.h, c.w}, y_d = {n, c.k, oh, ow};
        memory::dims w_d = c.g > 1 ? memory::dims{c.g, c.k / c.g, c.c / c.g, c.fy, c.fx} : memory::dims{c.k, c.c, c.fy, c.fx};
        memory::dims strides = {c.sy, c.sx}, dil = {c.dy - 1, c.dx - 1}, pad = {c.py, c.px};
        // Right padding as oneDNN wants it: what makes the output size come out exactly.
        memory::dims pad_r = {(oh - 1) * c.sy + c.dy * (c.fy - 1) + 1 - c.h - c.py, (ow - 1) * c.sx + c.dx * (c.fx - 1) + 1 - c.w - c.px};
        for (const char* variant : {"any", "nchw"}) {
            const tag act = std::string(variant) == "any" ? tag::any : tag::nchw;
            memory::desc xm(x_d, dt::f32, act), ym(y_d, dt::f32, act), wm(w_d, dt::f32, tag::any);
            auto fwd_d = convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, xm, wm, ym, strides, dil, pad, pad_r);
            auto fwd = convolution_forward::primitive_desc(fwd_d, eng);
            auto bd_d = convolution_backward_data::desc(algorithm::convolution_direct, xm, wm, ym, strides, dil, pad, pad_r);
            auto bd = convolution_backward_data::primitive_desc(bd_d, eng, fwd);
            auto bw_d = convolution_backward_weights::desc(algorithm::convolution_direct, xm, wm, ym, strides, dil, pad, pad_r);
            auto bw = convolution_backward_weights::primitive_desc(bw_d, eng, fwd);
            auto filled = [&](const memory::desc& d) {
                memory m(d, eng);
                float* p = (float*)m.get_data_handle();
                for (size_t j = 0; j < d.get_size() / sizeof(float); ++j) p[j] = (float)((j * 2654435761u) % 1000) / 500.f - 1.f;
                return m;
            };
            memory dy_bd = filled(bd.diff_dst_desc()), w_bd = filled(bd.weights_desc()), dx_bd(bd.diff_src_desc(), eng);
            convolution_backward_data bdp(bd);
            double us = median_us([&] { bdp.execute(s, {{DNNL_ARG_DIFF_DST, dy_bd}, {DNNL_ARG_WEIGHTS, w_bd}, {DNNL_ARG_DIFF_SRC, dx_bd}}); }, s, min_reps, target);
            std::printf("%s,%ld,data,%s,%.1f,%.1f\n", c.text.c_str(), n, variant, us, gflop / us * 1e6);
            memory x_bw = filled(bw.src_desc()), dy_bw = filled(bw.diff_dst_desc()), dw_bw(bw.diff_weights_desc(), eng);
            convolution_backward_weights bwp(bw);
            us = median_us([&] { bwp.execute(s, {{DNNL_ARG_SRC, x_bw}, {DNNL_ARG_DIFF_DST, dy_bw}, {DNNL_ARG_DIFF_WEIGHTS, dw_bw}}); }, s, min_reps, target);
            std::printf("%s,%ld,weights,%s,%.1f,%.1f\n", c.text.c_str(), n, variant, us, gflop / us * 1e6);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "dnnl_bwd: %s\n", e.what());
    return 1;
}
