#ifndef CSYSTEMSHIMS_H
#define CSYSTEMSHIMS_H
/* Thin wrappers over libc calls Swift cannot reach directly (variadic or macro-only). */

/* Disables core dumps and ptrace attach by other processes of the same user. Returns 0 on success. */
int cs_harden_process(void);

#endif
