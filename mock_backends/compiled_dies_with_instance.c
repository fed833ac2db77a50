/* Defect: the compiled sub-graph reads state that belongs to the instance that created it;
   once that instance is destroyed, execute() fails ("instance destroyed"). Breaks rule 12.5
   (compiled sub-graphs stay valid after the instance is destroyed): the runtime destroys its
   instances as soon as a network is loaded, so executing the network raises
   InvalidStateError; the conformance kit's NET-4 catches it too. (A real backend with this
   defect reads freed memory; this one keeps the state in a static table so that the test
   process survives.) */
#define MOCK_BACKEND_ID "MockCompiledDiesWithInstance"
#define MOCK_NO_BACKEND_FACTORY
#define MOCK_COMPILED_BEFORE_EXECUTE(self)                                                    \
    do {                                                                                      \
        if (!instance_alive[((DyingCompiled *)(self))->instance_slot]) {                      \
            if (message != NULL && message_size > 0)                                          \
                snprintf(message, message_size, "the instance that compiled this is destroyed"); \
            return BACKEND_STATUS_INVALID_STATE;                                              \
        }                                                                                     \
    } while (0)

#include "backend_api.h"

static int instance_alive[64];
static int next_slot;

typedef struct DyingCompiled {
    BackendCompiledSubgraph base;
    int instance_slot;                  /* the defect: tied to the instance's lifetime */
} DyingCompiled;

typedef struct DyingInstance {
    BackendInstance base;
    int slot;
} DyingInstance;

#include "subgraph_skeleton.h"

static BackendStatus optimize(const BackendInstance *self, const BackendSubgraph *subgraph,
                              BackendOptimizationViews *views, char *message, size_t message_size)
{
    uint64_t ids[64];
    uint32_t n = subgraph->num_layers < 64 ? subgraph->num_layers : 64;
    DyingCompiled *compiled = calloc(1, sizeof *compiled);
    (void)message, (void)message_size;
    if (compiled != NULL) {
        compiled->base.struct_size = (uint32_t)sizeof compiled->base;
        compiled->base.execute = mock_compiled_relu_execute;
        compiled->base.destroy = mock_compiled_destroy;
        compiled->instance_slot = ((const DyingInstance *)self)->slot;
    }
    for (uint32_t i = 0; i < n; i++)
        ids[i] = subgraph->layers[i]->id;
    views->add_substitution(views, ids, n, subgraph->inputs, subgraph->num_inputs,
                            subgraph->outputs, subgraph->num_outputs,
                            compiled ? &compiled->base : NULL);
    return BACKEND_STATUS_OK;
}

static void dying_destroy(BackendInstance *self)
{
    instance_alive[((DyingInstance *)self)->slot] = 0;
    free(self);
}

BACKEND_EXPORT void *BackendFactory(void)
{
    BackendInstance *made = mock_new_optimizing_instance(optimize);
    DyingInstance *instance;
    if (made == NULL)
        return NULL;
    instance = realloc(made, sizeof *instance);
    if (instance == NULL) {
        free(made);
        return NULL;
    }
    instance->slot = next_slot++ % 64;
    instance_alive[instance->slot] = 1;
    instance->base.destroy = dying_destroy;
    return &instance->base;
}
