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
//   g++ -O2 -std=c++17 -fopenmp dnnl_int8.cpp -o dnnl_int8 -ldnnl  (shares ../cpu-peer-common/conv_problem.hpp)
#include "../cpu-peer-common/conv_problem.hpp"

#include <cstdio>
#include <string>

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

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
        const Geometry geo = geometry(c, n);
        for (const char* variant : {"any", "nhwc"}) {
            const tag act = std::string(variant) == "any" ? tag::any : tag::nhwc;
            memory::desc xm(geo.x, dt::s8, act), ym(geo.y, dt::f32, act), wm(geo.w, dt::s8, tag::any);
            auto d = convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, xm, wm, ym, geo.strides, geo.dil, geo.pad, geo.pad_r);
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
            std::printf("%s,%ld,%s,%s,%.1f,%.1f,%.1f\n", c.text.c_str(), n, variant, pd.impl_info_str(), med, mn, geo.gflop / med * 1e6);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "dnnl_int8: %s\n", e.what());
    return 1;
}
