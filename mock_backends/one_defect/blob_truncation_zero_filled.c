/* Defect: loading a serialized program reads what is missing at the end of truncated bytes as
   zeros, so bytes cut short load (with constants partly zero) instead of being refused.
   Requirement: NET-11 */
#define OD_BACKEND_ID "DefectBlobTruncation"
#define OD_OWN_READ_BLOB
#include "base.h"

static int od_read_blob(const unsigned char **at, uint64_t *rest, void *into, uint64_t n)
{
    uint64_t have = n < *rest ? n : *rest;          /* the defect: the rest reads as zeros */
    memcpy(into, *at, (size_t)have);
    memset((unsigned char *)into + have, 0, (size_t)(n - have));
    *at += have;
    *rest -= have;
    return 1;
}
