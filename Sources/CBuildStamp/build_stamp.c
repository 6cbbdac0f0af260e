// The build stamp: which commit a binary was built from, and when.
//
// The values are weak definitions, NULL here. `make build` and `make deb` compile a small object
// defining them (see the Makefile's `build-stamp`) and hand it to the linker, whose strong
// definitions win. A new commit then costs a relink, not a rebuild, and a plain `swift build`
// still links, reporting an unstamped build.
#include "build_stamp.h"

#include <stddef.h>

__attribute__((weak)) const char *const deliveryd_build_commit = NULL;
__attribute__((weak)) const char *const deliveryd_build_date = NULL;

const char *deliveryd_stamped_commit(void) { return deliveryd_build_commit; }

const char *deliveryd_stamped_date(void) { return deliveryd_build_date; }
