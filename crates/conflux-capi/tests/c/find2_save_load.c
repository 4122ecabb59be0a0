/* Find 2.0 as a client uses it, across two processes.
 *   find2_save_load find BLOB : a handle made with a stream; a convolution problem (descriptors
 *       set, reset, set again) found, every solution run and checked; a conv + bias + ReLU
 *       problem fused, found and run; the best solution of each saved to BLOB and BLOB.fused.
 *   find2_save_load load BLOB : a new process loads both blobs, runs them on new data without
 *       any Find, and checks the solution queries; damaged blobs are refused with a reason. */
#define MIOPEN_BETA_API
#include "common.h"

static conv_geom g;

static void set_conv_problem(miopenProblem_t p, miopenTensorDescriptor_t x, miopenTensorDescriptor_t w,
                             miopenTensorDescriptor_t y)
{
    CHECK(miopenSetProblemTensorDescriptor(p, miopenTensorConvolutionX, x));
    CHECK(miopenSetProblemTensorDescriptor(p, miopenTensorConvolutionW, w));
    CHECK(miopenSetProblemTensorDescriptor(p, miopenTensorConvolutionY, y));
}

static void run_conv(miopenHandle_t h, miopenSolution_t s, float* x, float* w, float* y)
{
    size_t ws_size = 0;
    void* ws;
    miopenTensorArgument_t args[3];
    CHECK(miopenGetSolutionWorkspaceSize(s, &ws_size));
    ws = ws_size ? malloc(ws_size) : NULL;
    args[0].id = miopenTensorConvolutionX; args[0].descriptor = NULL; args[0].buffer = x;
    args[1].id = miopenTensorConvolutionW; args[1].descriptor = NULL; args[1].buffer = w;
    args[2].id = miopenTensorConvolutionY; args[2].descriptor = NULL; args[2].buffer = y;
    CHECK(miopenRunSolution(h, s, 3, args, ws, ws_size));
    free(ws);
}

static void run_fused(miopenHandle_t h, miopenSolution_t s, float* x, float* w, float* b, float* y)
{
    miopenTensorArgument_t args[4];
    args[0].id = miopenTensorConvolutionX; args[0].descriptor = NULL; args[0].buffer = x;
    args[1].id = miopenTensorConvolutionW; args[1].descriptor = NULL; args[1].buffer = w;
    args[2].id = miopenTensorBias; args[2].descriptor = NULL; args[2].buffer = b;
    args[3].id = miopenTensorActivationY; args[3].descriptor = NULL; args[3].buffer = y;
    CHECK(miopenRunSolution(h, s, 4, args, NULL, 0));
}

/* y = relu(conv(x, w) + b) */
static void ref_fused(const float* x, const float* w, const float* b, float* y)
{
    size_t i, per = (size_t)g.oh * g.ow;
    ref_conv_fwd(g, x, w, y);
    for(i = 0; i < y_count(g); i++) {
        float v = y[i] + b[(i / per) % (size_t)g.k];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

static void save(miopenSolution_t s, const char* path)
{
    size_t size = 0;
    char* blob;
    FILE* f;
    CHECK(miopenGetSolutionSize(s, &size));
    REQUIRE(size > 0);
    blob = (char*)malloc(size);
    CHECK(miopenSaveSolution(s, blob));
    f = fopen(path, "wb");
    REQUIRE(f != NULL && fwrite(blob, 1, size, f) == size);
    fclose(f);
    free(blob);
}

static char* read_file(const char* path, size_t* size)
{
    FILE* f = fopen(path, "rb");
    char* data;
    long n;
    REQUIRE(f != NULL);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = (char*)malloc((size_t)n + 1);
    REQUIRE(fread(data, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return data;
}

static int find_and_save(miopenHandle_t h, const char* path, float* x, float* w, float* b, float* y, float* want)
{
    miopenTensorDescriptor_t xd, wd, yd, bd;
    miopenConvolutionDescriptor_t conv;
    miopenActivationDescriptor_t relu;
    miopenProblem_t conv_p, fused, bias_p, act_p;
    miopenFindOptions_t opts;
    miopenSolution_t sols[16];
    size_t found = 0, i;
    float t_prev = -1.0f;
    char fused_path[512];
    make_descs(g, &xd, &wd, &yd, &conv);
    CHECK(miopenCreateTensorDescriptor(&bd));
    CHECK(miopenSet4dTensorDescriptor(bd, miopenFloat, 1, g.k, 1, 1));
    CHECK(miopenCreateActivationDescriptor(&relu));
    CHECK(miopenSetActivationDescriptor(relu, miopenActivationRELU, 0.0, 0.0, 0.0));

    /* A descriptor set to another shape first, then reset: the problem copies what it is given. */
    CHECK(miopenCreateConvProblem(&conv_p, conv, miopenProblemDirectionForward));
    CHECK(miopenSetProblemTensorDescriptor(conv_p, miopenTensorConvolutionX, wd));
    set_conv_problem(conv_p, xd, wd, yd);
    CHECK(miopenCreateFindOptions(&opts));
    CHECK(miopenSetFindOptionResultsOrder(opts, miopenFindResultsOrderByTime));
    CHECK(miopenSetFindOptionPreallocatedTensor(opts, miopenTensorConvolutionX, x));
    CHECK(miopenSetFindOptionPreallocatedTensor(opts, miopenTensorConvolutionW, w));
    CHECK(miopenSetFindOptionPreallocatedTensor(opts, miopenTensorConvolutionY, y));
    EXPECT_STATUS(miopenStatusBadParm, miopenSetFindOptionResultsOrder(opts, (miopenFindResultsOrder_t)7));
    CHECK(miopenFindSolutions(h, conv_p, opts, sols, &found, 16));
    REQUIRE(found >= 1);
    ref_conv_fwd(g, x, w, want);
    EXPECT_CLOSE(y, want, y_count(g), 0.0); /* Find writes the output, as Find 1.0 */
    for(i = 0; i < found; i++) {
        float t;
        uint64_t id;
        miopenConvAlgorithm_t algo;
        CHECK(miopenGetSolutionTime(sols[i], &t));
        REQUIRE(t >= t_prev);
        t_prev = t;
        CHECK(miopenGetSolutionSolverId(sols[i], &id));
        CHECK(miopenGetSolverIdConvAlgorithm(id, &algo));
        memset(y, 0xff, sizeof(float) * y_count(g)); /* NaN */
        run_conv(h, sols[i], x, w, y);
        EXPECT_CLOSE(y, want, y_count(g), 0.0);
    }
    save(sols[0], path);
    for(i = 0; i < found; i++)
        CHECK(miopenDestroySolution(sols[i]));

    /* conv -> bias -> ReLU as three problems fused into the first. */
    CHECK(miopenCreateConvProblem(&fused, conv, miopenProblemDirectionForward));
    CHECK(miopenSetProblemTensorDescriptor(fused, miopenTensorConvolutionX, xd));
    CHECK(miopenSetProblemTensorDescriptor(fused, miopenTensorConvolutionW, wd));
    CHECK(miopenCreateBiasProblem(&bias_p, miopenProblemDirectionForward));
    CHECK(miopenSetProblemTensorDescriptor(bias_p, miopenTensorBias, bd));
    CHECK(miopenCreateActivationProblem(&act_p, relu, miopenProblemDirectionForward));
    CHECK(miopenFuseProblems(fused, bias_p));
    CHECK(miopenFuseProblems(fused, act_p));
    EXPECT_STATUS(miopenStatusBadParm, miopenFuseProblems(fused, fused));
    CHECK(miopenFindSolutions(h, fused, NULL, sols, &found, 4));
    REQUIRE(found >= 1 && found <= 4);
    ref_fused(x, w, b, want);
    memset(y, 0xff, sizeof(float) * y_count(g));
    run_fused(h, sols[0], x, w, b, y);
    EXPECT_CLOSE(y, want, y_count(g), 0.0);
    snprintf(fused_path, sizeof fused_path, "%s.fused", path);
    save(sols[0], fused_path);
    for(i = 0; i < found; i++)
        CHECK(miopenDestroySolution(sols[i]));

    CHECK(miopenDestroyFindOptions(opts));
    CHECK(miopenDestroyProblem(conv_p));
    CHECK(miopenDestroyProblem(fused));
    CHECK(miopenDestroyProblem(bias_p));
    CHECK(miopenDestroyProblem(act_p));
    CHECK(miopenDestroyProblem(NULL));
    miopenDestroyTensorDescriptor(xd);
    miopenDestroyTensorDescriptor(wd);
    miopenDestroyTensorDescriptor(yd);
    miopenDestroyTensorDescriptor(bd);
    miopenDestroyConvolutionDescriptor(conv);
    miopenDestroyActivationDescriptor(relu);
    return 0;
}

static int load_and_run(miopenHandle_t h, const char* path, float* x, float* w, float* b, float* y, float* want)
{
    size_t size = 0, ws = 1;
    char* blob = read_file(path, &size);
    char fused_path[512];
    miopenSolution_t s, f;
    float t = 0.0f;
    uint64_t id = 0;
    CHECK(miopenLoadSolution(&s, blob, size));
    CHECK(miopenGetSolutionTime(s, &t));
    CHECK(miopenGetSolutionSolverId(s, &id));
    CHECK(miopenGetSolutionWorkspaceSize(s, &ws));
    REQUIRE(t >= 0.0f && id > 0);
    memset(y, 0xff, sizeof(float) * y_count(g));
    run_conv(h, s, x, w, y);
    ref_conv_fwd(g, x, w, want);
    EXPECT_CLOSE(y, want, y_count(g), 0.0);

    /* Damaged or truncated blobs are refused with a reason, and nothing is created. */
    f = NULL;
    EXPECT_STATUS(miopenStatusBadParm, miopenLoadSolution(&f, blob, size / 2));
    REQUIRE(f == NULL && strstr(confluxGetLastErrorMessage(), "miopenLoadSolution") != NULL);
    blob[0] = 'X';
    EXPECT_STATUS(miopenStatusBadParm, miopenLoadSolution(&f, blob, size));
    REQUIRE(f == NULL);
    EXPECT_STATUS(miopenStatusInvalidValue, miopenGetSolverIdConvAlgorithm(999999, NULL));
    free(blob);

    snprintf(fused_path, sizeof fused_path, "%s.fused", path);
    blob = read_file(fused_path, &size);
    CHECK(miopenLoadSolution(&f, blob, size));
    memset(y, 0xff, sizeof(float) * y_count(g));
    run_fused(h, f, x, w, b, y);
    ref_fused(x, w, b, want);
    EXPECT_CLOSE(y, want, y_count(g), 0.0);
    free(blob);
    CHECK(miopenDestroySolution(s));
    CHECK(miopenDestroySolution(f));
    return 0;
}

int main(int argc, char** argv)
{
    miopenHandle_t h;
    float *x, *w, *y, *want, b[6] = {1, -2, 3, 0, -1, 2};
    int load;
    REQUIRE(argc == 3);
    load = strcmp(argv[1], "load") == 0;
    g = geom(2, 5, 9, 8, 6, 3, 3, 1, 1, 1);
    x = alloc_floats(x_count(g));
    w = alloc_floats(w_count(g));
    y = alloc_floats(y_count(g));
    want = alloc_floats(y_count(g));
    /* The loading process runs on other data than the one that searched. */
    fill_ints(x, x_count(g), load ? 11u : 1u, 2);
    fill_ints(w, w_count(g), load ? 12u : 2u, 2);
    CHECK(miopenCreateWithStream(&h, (miopenAcceleratorQueue_t)0));
    if(load)
        load_and_run(h, argv[2], x, w, b, y, want);
    else
        find_and_save(h, argv[2], x, w, b, y, want);
    CHECK(miopenDestroy(h));
    free(x); free(w); free(y); free(want);
    printf("find2_save_load: ok\n");
    return 0;
}
