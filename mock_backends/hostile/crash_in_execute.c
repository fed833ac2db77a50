/* Defect: runs Activation relu, but its workload crashes (SIGSEGV) when executed.
   Breaks conformance LAYER-1 (claimed layers run and match the reference) -> CRASH. */
#include <signal.h>

#define MOCK_BACKEND_ID "MockCrashInExecute"
#define MOCK_RUNS_RELU
#define MOCK_BEFORE_EXECUTE() raise(SIGSEGV)
#include "../skeleton.h"
