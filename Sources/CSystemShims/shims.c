#include "CSystemShims.h"
#include <sys/prctl.h>
#include <sys/resource.h>

int cs_harden_process(void) {
    struct rlimit none = {0, 0};
    int rc = setrlimit(RLIMIT_CORE, &none);
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) rc = -1;
    return rc;
}
