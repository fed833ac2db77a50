/* Defect: every descriptor is read whole, whatever its struct_size: a Convolution2d, Pooling2d
   or Softmax descriptor of Backend API 1.1's size (as a runtime built against 1.1 or 1.2 fills
   it) is read with whatever lies past it as groups, ceil_mode, axis or log.
   Requirement: ABI-6 */
#define OD_BACKEND_ID "DefectDescriptorPastSize"
#define OD_OWN_READ_DESCRIPTOR
#include "base.h"

static void od_read_descriptor(void *into, size_t size, const void *descriptor)
{
    memcpy(into, descriptor, size); /* the defect: min(struct_size, size) */
}
