/* Correct: every layer of the Backend API, in plain loops (base.h with no knob set), with a
   memory manager and the runtime's custom allocator. Written apart from reference_backend/.
   Must be conformant, with no failure in any requirement. */
#define OD_BACKEND_ID "CorrectPlain"
#include "../base.h"
