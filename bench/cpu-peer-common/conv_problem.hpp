// What conflux's oneDNN peer harnesses (bench/cpu-peer-bwd, bench/cpu-peer-int8) share: the
// problem syntax of the benchmark lists, the geometry oneDNN wants for it (right padding that
// makes the output size come out exactly, grouped weights as 5-D), and the timing loop, which
// times runs the way bench_cpu times conflux (warm-up, then individually timed runs).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// cfg = C-H-W-K-fy-fx-py-px[-sy-sx-g-dy-dx] (stride, groups, dilation as in MIOpen; 1 = dense).
struct Cfg {
    long c, h, w, k, fy, fx, py, px, sy = 1, sx = 1, g = 1, dy = 1, dx = 1;
    std::string text;
};

inline Cfg parse(const std::string& s) {
    std::vector<long> v;
    std::stringstream ss(s);
    for (std::string t; std::getline(ss, t, '-');) v.push_back(std::atol(t.c_str()));
    if (v.size() != 8 && v.size() != 13) throw std::runtime_error("cfg needs 8 or 13 fields: " + s);
    Cfg c{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    if (v.size() == 13) { c.sy = v[8]; c.sx = v[9]; c.g = v[10]; c.dy = v[11]; c.dx = v[12]; }
    c.text = s;
    return c;
}

// A problem of batch n in oneDNN's terms.
struct Geometry {
    double gflop;
    dnnl::memory::dims x, y, w, strides, dil, pad, pad_r;
};

inline Geometry geometry(const Cfg& c, long n) {
    const long oh = (c.h + 2 * c.py - c.dy * (c.fy - 1) - 1) / c.sy + 1, ow = (c.w + 2 * c.px - c.dx * (c.fx - 1) - 1) / c.sx + 1;
    Geometry g;
    g.gflop = 2.0 * n * c.k * oh * ow * (c.c / c.g) * c.fy * c.fx * 1e-9;
    g.x = {n, c.c, c.h, c.w};
    g.y = {n, c.k, oh, ow};
    g.w = c.g > 1 ? dnnl::memory::dims{c.g, c.k / c.g, c.c / c.g, c.fy, c.fx} : dnnl::memory::dims{c.k, c.c, c.fy, c.fx};
    g.strides = {c.sy, c.sx};
    g.dil = {c.dy - 1, c.dx - 1};  // oneDNN counts dilation from 0
    g.pad = {c.py, c.px};
    g.pad_r = {(oh - 1) * c.sy + c.dy * (c.fy - 1) + 1 - c.h - c.py, (ow - 1) * c.sx + c.dx * (c.fx - 1) + 1 - c.w - c.px};
    return g;
}

// Median and minimum (µs) of individually timed runs after a warm-up: at least min_reps runs
// and target seconds.
inline std::pair<double, double> time_us(const std::function<void()>& f, dnnl::stream& s, int min_reps, double target) {
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
