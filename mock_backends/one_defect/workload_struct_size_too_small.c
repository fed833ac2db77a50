/* Defect: workloads declare struct_size 8 (only the header's two integers), so a runtime must
   not read their execute and destroy members.
   Requirement: ABI-1 */
#define OD_BACKEND_ID "DefectWorkloadSize"
#define OD_WORKLOAD_STRUCT_SIZE ((uint32_t)offsetof(BackendWorkload, execute)) /* the defect */
#include "base.h"
