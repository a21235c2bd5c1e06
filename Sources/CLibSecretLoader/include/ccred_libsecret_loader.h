#ifndef CCRED_LIBSECRET_LOADER_H
#define CCRED_LIBSECRET_LOADER_H
/* The definitions behind CLibSecret's shim.h (the ccred_* pointers and ccred_libsecret_load).
 * Swift imports CLibSecret; this target only has to be linked. */
#endif
