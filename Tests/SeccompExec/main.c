/* Test-only: runs a program the way a container's default seccomp profile would (Docker's
 * refuses add_key and keyctl): `seccomp-exec ERRNO PROGRAM [ARG...]` installs a filter failing both
 * calls with ERRNO (1 = EPERM, 38 = ENOSYS), then execs PROGRAM, which inherits the filter. */
#include "CSeccompTestSupport.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fputs("usage: seccomp-exec ERRNO PROGRAM [ARG...]\n", stderr);
        return 2;
    }
    if (cseccomp_refuse_keyring_calls(CSECCOMP_REFUSE_ADD_KEY | CSECCOMP_REFUSE_KEYCTL, atoi(argv[1])) != 0) {
        perror("seccomp-exec: cannot install the filter");
        return 2;
    }
    execv(argv[2], argv + 2);
    perror("seccomp-exec: exec");
    return 127;
}
