set -u
tar -xJf .gpu.tar.xz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64 CONFLUX_CACHE_DIR=/tmp/cc CONFLUX_REQUIRE_GPU=1 CONFLUX_DRIVER_BIN=$PWD/.gpu/conflux-driver
mkdir -p $OUT/logs
ls .gpu/bin | grep -v -E "example|^bench_|^conflux_" | xargs -P 6 -I{} sh -c 'timeout 250 .gpu/bin/{} --test-threads=3 > $OUT/logs/{}.log 2>&1; echo "{} rc=$?" >> $OUT/logs/rcs.txt'
(cd .gpu && MIOPEN_LIB_PATH=$PWD/lib/libMIOpen.so timeout 100 python3 capi_smoke.py > $OUT/logs/capi_smoke.log 2>&1; echo "capi_smoke rc=$?" >> $OUT/logs/rcs.txt)
(timeout 150 bash .gpu/python_tests.sh > $OUT/logs/python_tests.log 2>&1; echo "python_tests rc=$?" >> $OUT/logs/rcs.txt)
cd $OUT && tar -czf logs.tgz logs && rm -rf logs
