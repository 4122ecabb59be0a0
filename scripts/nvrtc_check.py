#!/usr/bin/env python3
"""Compile generated kernel sources offline, without a GPU: NVRTC to PTX (the options the
backend uses), then ptxas for the registers, spills and shared memory of each kernel.

Sources come from unit tests that write them when CONFLUX_KERNEL_SOURCES names a folder, e.g.
  mkdir -p /tmp/ksrc && CONFLUX_KERNEL_SOURCES=/tmp/ksrc cargo test -p conflux --lib grouped_tc
  python3 scripts/nvrtc_check.py /tmp/ksrc [--arch sm_90a]
NVRTC and ptxas come from PyPI's nvidia-cuda-nvrtc and nvidia-cuda-nvcc wheels (a venv:
python3 -m venv /tmp/nv && /tmp/nv/bin/pip install nvidia-cuda-nvrtc nvidia-cuda-nvcc), found
under the running interpreter's site-packages, or give --nvrtc / --ptxas. Exit status 1 when any
source fails to compile or a kernel spills. `--keep DIR` keeps each PTX and cubin there (for
nvdisasm from the nvidia-cuda-nvdisasm wheel). Each line also gives the compile times (NVRTC to PTX,
then ptxas as a process: its start-up is included), for cold-compile work.
"""
import argparse
import ctypes
import glob
import os
import re
import site
import subprocess
import sys
import tempfile
import time


def find(pattern, given):
    if given:
        return given
    roots = site.getsitepackages() + [site.getusersitepackages()]
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "*", pattern)))
        if hits:
            return hits[-1]
    sys.exit(f"nvrtc_check: {pattern} not found under {roots}; install the nvidia-cuda-nvrtc / nvidia-cuda-nvcc wheels")


def nvrtc_ptx(lib, name, src, opts):
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    status = lib.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    if status:
        return None, log.value.decode(errors="replace")
    lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetPTX(prog, ptx)
    return ptx.value.decode(), log.value.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--nvrtc")
    ap.add_argument("--ptxas")
    ap.add_argument("--keep", help="folder for each source's PTX and cubin (for nvdisasm)")
    a = ap.parse_args()
    lib = ctypes.CDLL(find("lib/libnvrtc.so*", a.nvrtc))
    ptxas = find("bin/ptxas", a.ptxas)
    opts = [f"--gpu-architecture=compute_{a.arch[3:]}", "--std=c++17"]
    bad = 0
    for path in sorted(glob.glob(os.path.join(a.folder, "*.cu"))):
        name = os.path.basename(path)
        t0 = time.perf_counter()
        ptx, log = nvrtc_ptx(lib, name, open(path).read(), opts)
        t1 = time.perf_counter()
        if ptx is None:
            bad += 1
            print(f"FAIL {name}\n{log}")
            continue
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        t2 = time.perf_counter()
        cubin = os.path.join(a.keep, name[:-3] + ".cubin") if a.keep else os.devnull
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            with open(os.path.join(a.keep, name[:-3] + ".ptx"), "w") as k:
                k.write(ptx)
        out = subprocess.run([ptxas, f"-arch={a.arch}", "-v", "-o", cubin, f.name], capture_output=True, text=True)
        t3 = time.perf_counter()
        os.unlink(f.name)
        text = out.stdout + out.stderr
        regs = re.findall(r"Used (\d+) registers", text)
        spills = re.findall(r"(\d+) bytes spill stores", text)
        spilled = any(int(s) > 0 for s in spills)
        if out.returncode or spilled:
            bad += 1
        status = "FAIL" if out.returncode else ("SPILL" if spilled else "ok")
        print(f"{status:5} {name}: registers {','.join(regs)} spill stores {','.join(spills)}; NVRTC {1e3 * (t1 - t0):.0f} ms, ptxas {1e3 * (t3 - t2):.0f} ms")
        if out.returncode:
            print(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
