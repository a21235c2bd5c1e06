#include "CSystemShims.h"
#include <sys/prctl.h>
#include <sys/resource.h>

static struct rlimit original_core;
static int have_original_core;

int cs_harden_process(void) {
    int rc = 0;
    if (getrlimit(RLIMIT_CORE, &original_core) == 0) {
        have_original_core = 1;
        /* Only the soft limit: the hard one stays, so `exec`'s child can get its own limit back. */
        struct rlimit none = {0, original_core.rlim_max};
        if (setrlimit(RLIMIT_CORE, &none) != 0) rc = -1;
    } else {
        rc = -1;
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) rc = -1;
    return rc;
}

void cs_restore_core_limit(void) {
    if (have_original_core) setrlimit(RLIMIT_CORE, &original_core);
}
