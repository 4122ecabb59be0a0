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
//   g++ -O2 -std=c++17 -fopenmp dnnl_bwd.cpp -o dnnl_bwd -ldnnl  (shares ../cpu-peer-common/conv_problem.hpp)
#include "../cpu-peer-common/conv_problem.hpp"

#include <cstdio>
#include <string>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

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
        const Geometry geo = geometry(c, n);
        for (const char* variant : {"any", "nchw"}) {
            const tag act = std::string(variant) == "any" ? tag::any : tag::nchw;
            memory::desc xm(geo.x, dt::f32, act), ym(geo.y, dt::f32, act), wm(geo.w, dt::f32, tag::any);
            auto fwd_d = convolution_forward::desc(prop_kind::forward_training, algorithm::convolution_direct, xm, wm, ym, geo.strides, geo.dil, geo.pad, geo.pad_r);
            auto fwd = convolution_forward::primitive_desc(fwd_d, eng);
            auto bd_d = convolution_backward_data::desc(algorithm::convolution_direct, xm, wm, ym, geo.strides, geo.dil, geo.pad, geo.pad_r);
            auto bd = convolution_backward_data::primitive_desc(bd_d, eng, fwd);
            auto bw_d = convolution_backward_weights::desc(algorithm::convolution_direct, xm, wm, ym, geo.strides, geo.dil, geo.pad, geo.pad_r);
            auto bw = convolution_backward_weights::primitive_desc(bw_d, eng, fwd);
            auto filled = [&](const memory::desc& d) {
                memory m(d, eng);
                float* p = (float*)m.get_data_handle();
                for (size_t j = 0; j < d.get_size() / sizeof(float); ++j) p[j] = (float)((j * 2654435761u) % 1000) / 500.f - 1.f;
                return m;
            };
            memory dy_bd = filled(bd.diff_dst_desc()), w_bd = filled(bd.weights_desc()), dx_bd(bd.diff_src_desc(), eng);
            convolution_backward_data bdp(bd);
            double us = time_us([&] { bdp.execute(s, {{DNNL_ARG_DIFF_DST, dy_bd}, {DNNL_ARG_WEIGHTS, w_bd}, {DNNL_ARG_DIFF_SRC, dx_bd}}); }, s, min_reps, target).first;
            std::printf("%s,%ld,data,%s,%.1f,%.1f\n", c.text.c_str(), n, variant, us, geo.gflop / us * 1e6);
            memory x_bw = filled(bw.src_desc()), dy_bw = filled(bw.diff_dst_desc()), dw_bw(bw.diff_weights_desc(), eng);
            convolution_backward_weights bwp(bw);
            us = time_us([&] { bwp.execute(s, {{DNNL_ARG_SRC, x_bw}, {DNNL_ARG_DIFF_DST, dy_bw}, {DNNL_ARG_DIFF_WEIGHTS, dw_bw}}); }, s, min_reps, target).first;
            std::printf("%s,%ld,weights,%s,%.1f,%.1f\n", c.text.c_str(), n, variant, us, geo.gflop / us * 1e6);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "dnnl_bwd: %s\n", e.what());
    return 1;
}
