set -u
tar -xJf .gpu.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CONFLUX_CACHE_DIR=/tmp/cc
cd .gpu
BENCH_SWEEP=CudaConvImplicitGemmTma timeout 280 ./ex/bench_cba cba_resnet.txt 64 i8 nhwc 20 >> $OUT/sweep.csv 2>> $OUT/sweep.err
BENCH_SWEEP=CudaConvImplicitGemmTma timeout 200 ./ex/bench_cba cba_resnet.txt 64 f16 nhwc 20 >> $OUT/sweep.csv 2>> $OUT/sweep.err
