/* Defect: the backend id is 257 bytes long, one more than BACKEND_ID_MAX_LENGTH.
   Breaks the backend id check (at most 256 bytes) -> invalid-backend-id. */
#define SIXTEEN "LongLongLongLong"
#define TWO_HUNDRED_FIFTY_SIX \
    SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN \
    SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN SIXTEEN
#define MOCK_BACKEND_ID TWO_HUNDRED_FIFTY_SIX "X"
#include "skeleton.h"
