#ifndef CWARMPATH_H
#define CWARMPATH_H
/*
 * The warm path (ARCHITECTURE.md, "The warm path"): `--version` and a `get` answered from a fresh
 * access-cache entry, before the Swift runtime starts. It runs from the executable's
 * .preinit_array, so nothing here is called by Swift; this header only names the version the
 * warm path prints, which EndToEndTests compares with CommandLineSpec.version.
 */

/* "0.2.0": what `chatgpt-credential --version` prints after the program's name. */
const char *cw_version(void);

#endif
