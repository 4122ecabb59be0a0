set -u
tar -xJf .gpu.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CONFLUX_CACHE_DIR=/tmp/cc CONFLUX_REQUIRE_GPU=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
(timeout 250 .gpu/bin/quantized --test-threads=4 > $OUT/quantized.log 2>&1; echo "quantized rc=$?" >> $OUT/gpu.txt) &
(timeout 250 .gpu/bin/conv_tensor_core --test-threads=3 > $OUT/conv_tensor_core.log 2>&1; echo "conv_tensor_core rc=$?" >> $OUT/gpu.txt) &
wait
cd .gpu
for r in 1 2; do
for args in "f16 nhwc" "i8 nhwc" "e4m3 nhwc"; do
  timeout 100 ./ex/bench_cba cba_resnet.txt 64 $args 30 >> $OUT/bench.csv 2>> $OUT/bench.err
done
BENCH_QY=i8 timeout 100 ./ex/bench_cba cba_resnet.txt 64 i8 nhwc 30 | sed 's/,i8,/,i8->i8,/' >> $OUT/bench.csv 2>> $OUT/bench.err
done
