/* Defect: tensors' data_type is never looked at: a layer declared with any data type other than
   float32 is accepted (and would be run as float32).
   Requirement: SUP-2 */
#define OD_BACKEND_ID "DefectDataType"
#define OD_DATA_TYPE_KNOWN(t) ((void)(t), 1) /* the defect */
#include "base.h"
