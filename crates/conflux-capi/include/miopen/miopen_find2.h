/*
 * conflux: miopen_find2.h — Find 2.0, MIOpen's problem / solution API.
 *
 * Describe a problem once (a convolution in any direction; bias, activation and batch-norm
 * operators fused after a forward convolution or alone; softmax), find its solutions (one per
 * conflux solver, timed on this device), run one with new tensors as often as needed, and save
 * it: a saved solution loads in another process and runs without searching again.
 *
 * Included by <miopen/miopen.h>; include that header, not this one.
 */
#ifndef CONFLUX_MIOPEN_FIND2_H_
#define CONFLUX_MIOPEN_FIND2_H_

#include <miopen/miopen.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct miopenMhaDescriptor* miopenMhaDescriptor_t;
typedef struct miopenSoftmaxDescriptor* miopenSoftmaxDescriptor_t;

typedef struct miopenProblem* miopenProblem_t;

typedef enum
{
    miopenProblemDirectionForward = 0,
    miopenProblemDirectionBackward = 1,
    miopenProblemDirectionBackwardWeights = 2,
#ifdef MIOPEN_BETA_API
    miopenProblemDirectionInference = 4,
#endif
} miopenProblemDirection_t;

typedef enum
{
    miopenTensorArgumentIdInvalid = 0,
    miopenTensorConvolutionX = 1,
    miopenTensorConvolutionW = 2,
    miopenTensorConvolutionY = 3,
    miopenTensorMhaK = 4,
    miopenTensorMhaQ = 5,
    miopenTensorMhaV = 6,
    miopenTensorMhaDescaleK = 7,
    miopenTensorMhaDescaleQ = 8,
    miopenTensorMhaDescaleV = 9,
    miopenTensorMhaDescaleS = 10,
    miopenTensorMhaScaleS = 11,
    miopenTensorMhaScaleO = 12,
    miopenTensorMhaDropoutProbability = 13,
    miopenTensorMhaDropoutSeed = 14,
    miopenTensorMhaDropoutOffset = 15,
    miopenTensorMhaO = 16,
    miopenTensorMhaAmaxO = 17,
    miopenTensorMhaAmaxS = 18,
    miopenTensorMhaM = 19,
    miopenTensorMhaZInv = 20,
    miopenTensorMhaDO = 21,
    miopenTensorMhaDescaleO = 22,
    miopenTensorMhaDescaleDO = 23,
    miopenTensorMhaDescaleDS = 24,
    miopenTensorMhaScaleDS = 25,
    miopenTensorMhaScaleDQ = 26,
    miopenTensorMhaScaleDK = 27,
    miopenTensorMhaScaleDV = 28,
    miopenTensorMhaDQ = 29,
    miopenTensorMhaDK = 30,
    miopenTensorMhaDV = 31,
    miopenTensorMhaAmaxDQ = 32,
    miopenTensorMhaAmaxDK = 33,
    miopenTensorMhaAmaxDV = 34,
    miopenTensorMhaAmaxDS = 35,
    miopenTensorMhaBias = 36,
#ifdef MIOPEN_BETA_API
    miopenTensorActivationX = 37,
    miopenTensorActivationY = 38,
    miopenTensorActivationDX = 39,
    miopenTensorActivationDY = 40,
    miopenTensorBiasX = 41,
    miopenTensorBiasY = 42,
    miopenTensorBias = 43,
    miopenTensorSoftmaxX = 44,
    miopenTensorSoftmaxY = 45,
    miopenTensorSoftmaxDX = 46,
    miopenTensorSoftmaxDY = 47,
    miopenTensorBatchnormX = 48,
    miopenTensorBatchnormY = 49,
    miopenTensorBatchnormRunningMean = 50,
    miopenTensorBatchnormRunningVariance = 51,
    miopenTensorBatchnormSavedMean = 52,
    miopenTensorBatchnormSavedVariance = 53,
    miopenTensorBatchnormScale = 54,
    miopenTensorBatchnormScaleDiff = 55,
    miopenTensorBatchnormEstimatedMean = 56,
    miopenTensorBatchnormEstimatedVariance = 57,
    miopenTensorBatchnormBias = 58,
    miopenTensorBatchnormBiasDiff = 59,
    miopenTensorBatchnormDX = 60,
    miopenTensorBatchnormDY = 61,
#endif
    /* Bit 31 marks scalar arguments (1U << 31; written so that C keeps it an int). */
    miopenTensorArgumentIsScalar = -2147483647 - 1,
    miopenTensorMhaMask = miopenTensorArgumentIsScalar | 1,
#ifdef MIOPEN_BETA_API
    miopenScalarBatchnormExpAvgFactor = miopenTensorArgumentIsScalar | 2,
    miopenScalarBatchnormEpsilon = miopenTensorArgumentIsScalar | 3,
#endif
} miopenTensorArgumentId_t;

typedef enum
{
    miopenFindResultsOrderByTime = 0,
    miopenFindResultsOrderByWorkspaceSize = 1,
} miopenFindResultsOrder_t;

/* A convolution in any direction. Set x (ConvolutionX), w and y before Find; a forward
   problem derives y when it is not set. */
MIOPEN_EXPORT miopenStatus_t miopenCreateConvProblem(
    miopenProblem_t* problem,
    miopenConvolutionDescriptor_t operatorDesc,
    miopenProblemDirection_t direction);

typedef enum
{
    miopenMhaMaskNone = 0,
    miopenMhaMaskCausal = 1,
} miopenMhaMask_t;

/* Attention problems: conflux does not compute them (NotImplemented, as the Mha descriptor calls). */
MIOPEN_EXPORT miopenStatus_t miopenCreateMhaProblem(
    miopenProblem_t* problem,
    miopenMhaDescriptor_t operatorDesc,
    miopenProblemDirection_t direction);

MIOPEN_EXPORT miopenStatus_t miopenCreateMhaDescriptor(miopenMhaDescriptor_t* mhaDesc);

MIOPEN_EXPORT miopenStatus_t miopenSetMhaDescriptor(miopenMhaDescriptor_t mhaDesc, float scale);

MIOPEN_EXPORT miopenStatus_t miopenGetMhaDescriptor(miopenMhaDescriptor_t mhaDesc, float* scale);

/* Softmax descriptors hold alpha, beta, the algorithm and the mode for softmax problems. */
MIOPEN_EXPORT miopenStatus_t miopenCreateSoftmaxDescriptor(miopenSoftmaxDescriptor_t* softmaxDesc);

MIOPEN_EXPORT miopenStatus_t miopenSetSoftmaxDescriptor(
    miopenSoftmaxDescriptor_t softmaxDesc,
    float alpha,
    float beta,
    miopenSoftmaxAlgorithm_t algorithm,
    miopenSoftmaxMode_t mode);

MIOPEN_EXPORT miopenStatus_t miopenGetSoftmaxDescriptor(
    const miopenSoftmaxDescriptor_t softmaxDesc,
    float* alpha,
    float* beta,
    miopenSoftmaxAlgorithm_t* algorithm,
    miopenSoftmaxMode_t* mode);

MIOPEN_EXPORT miopenStatus_t miopenDestroyProblem(miopenProblem_t problem);

/* Descriptors are set on each problem before it is fused; the descriptor is copied. */
MIOPEN_EXPORT miopenStatus_t miopenSetProblemTensorDescriptor(
    miopenProblem_t problem,
    miopenTensorArgumentId_t id,
    const miopenTensorDescriptor_t descriptor);

typedef struct miopenFindOptions* miopenFindOptions_t;

MIOPEN_EXPORT miopenStatus_t miopenCreateFindOptions(miopenFindOptions_t* options);

MIOPEN_EXPORT miopenStatus_t miopenDestroyFindOptions(miopenFindOptions_t options);

/* Nonzero: tune tunable solvers while timing them (the perf-db keeps the best configuration). */
MIOPEN_EXPORT miopenStatus_t miopenSetFindOptionTuning(miopenFindOptions_t options, int value);

MIOPEN_EXPORT miopenStatus_t miopenSetFindOptionResultsOrder(
    miopenFindOptions_t options,
    miopenFindResultsOrder_t value);

MIOPEN_EXPORT miopenStatus_t miopenSetFindOptionWorkspaceLimit(
    miopenFindOptions_t options,
    size_t value);

/* Without it Find allocates the workspace it times with (up to the workspace limit). */
MIOPEN_EXPORT miopenStatus_t miopenSetFindOptionPreallocatedWorkspace(
    miopenFindOptions_t options,
    void* buffer,
    size_t size);

/* Find times a convolution on these buffers and writes its output there; tensors not given
   are allocated for the search. Fused problems are timed on their own scratch. */
MIOPEN_EXPORT miopenStatus_t miopenSetFindOptionPreallocatedTensor(
    miopenFindOptions_t options,
    miopenTensorArgumentId_t id,
    void* buffer);

/* Accepted and ignored: a saved solution holds no kernels. On a GPU its kernels come from
   conflux's on-disk kernel cache (CONFLUX_CACHE_DIR) or are compiled once at the first run. */
MIOPEN_EXPORT miopenStatus_t miopenSetFindOptionAttachBinaries(
    miopenFindOptions_t options,
    unsigned attach);

typedef struct miopenSolution* miopenSolution_t;

/* One solution per solver, fastest first (or smallest workspace first), at most maxSolutions;
   `options` may be NULL. A convolution problem's output is written (as Find 1.0 does). A problem
   that lowers to no single conflux solver chain gives UnsupportedOp with the reason. */
MIOPEN_EXPORT miopenStatus_t miopenFindSolutions(
    miopenHandle_t handle,
    miopenProblem_t problem,
    miopenFindOptions_t options,
    miopenSolution_t* solutions,
    size_t* numSolutions,
    size_t maxSolutions);

typedef struct miopenTensorArgument_t
{
    miopenTensorArgumentId_t id;
    miopenTensorDescriptor_t* descriptor; /* optional (NULL): the problem's descriptor */
    void* buffer;
} miopenTensorArgument_t;

/* Tensors by argument id: a convolution needs x, w and y; a fused problem its first operator's
   input, its last operator's output and every operator's parameters (bias, batch-norm scale,
   bias, means, variances; epsilon and the averaging factor as scalar ids whose buffer points to
   a host double). A descriptor given with a tensor must equal the problem's. A solution found or
   saved on another device model (or CPU architecture) is refused with the reason. */
MIOPEN_EXPORT miopenStatus_t miopenRunSolution(
    miopenHandle_t handle,
    miopenSolution_t solution,
    size_t nInputs,
    const miopenTensorArgument_t* tensors,
    void* workspace,
    size_t workspaceSize);

MIOPEN_EXPORT miopenStatus_t miopenDestroySolution(miopenSolution_t solution);

/* Rebuilds a saved solution without searching. A blob of another conflux version, a solver this
   build lacks or a damaged blob gives BadParm with the reason. */
MIOPEN_EXPORT miopenStatus_t miopenLoadSolution(
    miopenSolution_t* solution,
    const char* data,
    size_t size);

/* `data` must hold miopenGetSolutionSize bytes. The blob is text: the conflux version, the
   device, the solver and its tuned configuration, and the problem. */
MIOPEN_EXPORT miopenStatus_t miopenSaveSolution(miopenSolution_t solution, char* data);

MIOPEN_EXPORT miopenStatus_t miopenGetSolutionSize(miopenSolution_t solution, size_t* size);

MIOPEN_EXPORT miopenStatus_t miopenGetSolutionWorkspaceSize(
    miopenSolution_t solution,
    size_t* workspaceSize);

/* Find's measurement in ms; -1 for a problem only one solver computes (not timed). */
MIOPEN_EXPORT miopenStatus_t miopenGetSolutionTime(miopenSolution_t solution, float* time);

/* conflux solution ids, the same that immediate mode takes. */
MIOPEN_EXPORT miopenStatus_t miopenGetSolutionSolverId(
    miopenSolution_t solution,
    uint64_t* solverId);

/* InvalidValue for an id no conflux solver has. */
MIOPEN_EXPORT miopenStatus_t miopenGetSolverIdConvAlgorithm(
    uint64_t solverId,
    miopenConvAlgorithm_t* result);

#ifdef MIOPEN_BETA_API

MIOPEN_EXPORT miopenStatus_t miopenCreateActivationProblem(
    miopenProblem_t* problem,
    miopenActivationDescriptor_t operatorDesc,
    miopenProblemDirection_t direction);

/* Directions: Inference (estimated statistics), Forward (training) and Backward. */
MIOPEN_EXPORT miopenStatus_t miopenCreateBatchnormProblem(
    miopenProblem_t* problem,
    miopenBatchNormMode_t mode,
    bool runningMeanVariance,
    miopenProblemDirection_t direction);

/* problem1 becomes the fused problem: its operators, then problem2's (problem2 stays valid).
   conflux fuses a forward convolution followed by bias, activation and batch-norm operators,
   and chains of those operators alone (as fusion plans do). */
MIOPEN_EXPORT miopenStatus_t miopenFuseProblems(miopenProblem_t problem1, miopenProblem_t problem2);

MIOPEN_EXPORT miopenStatus_t miopenCreateBiasProblem(
    miopenProblem_t* problem,
    miopenProblemDirection_t direction);

MIOPEN_EXPORT miopenStatus_t miopenCreateSoftmaxProblem(
    miopenProblem_t* problem,
    miopenSoftmaxDescriptor_t operatorDesc,
    miopenProblemDirection_t direction);

#endif

#ifdef __cplusplus
}
#endif

#endif /* CONFLUX_MIOPEN_FIND2_H_ */
