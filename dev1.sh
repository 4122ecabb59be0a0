set -u
tar -xJf .gpu.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CONFLUX_CACHE_DIR=/tmp/cc CONFLUX_REQUIRE_GPU=1 CONFLUX_DRIVER_BIN=$PWD/.gpu/conflux-driver
mkdir -p $OUT/logs
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
timeout 200 .gpu/bin/quantized --test-threads=4 > $OUT/quantized.log 2>&1; echo "quantized rc=$?" >> $OUT/gpu.txt
cd .gpu
for args in "f16 nhwc" "i8 nhwc" "e4m3 nhwc"; do
  timeout 100 ./ex/bench_cba cba_resnet.txt 64 $args 20 >> $OUT/bench.csv 2>> $OUT/bench.err
done
BENCH_QY=i8 timeout 100 ./ex/bench_cba cba_resnet.txt 64 i8 nhwc 20 | grep conv- >> $OUT/bench.csv 2>> $OUT/bench.err
cd ..
ls .gpu/bin | grep -v -E "example|^bench_|^conflux_|^quantized" | xargs -P 6 -I{} sh -c 'timeout 230 .gpu/bin/{} --test-threads=3 > $OUT/logs/{}.log 2>&1; echo "{} rc=$?" >> $OUT/logs/rcs.txt'
cd $OUT && tar -czf logs.tgz logs && rm -rf logs
