#ifndef DELIVERYD_CSQLITE_SHIM_H
#define DELIVERYD_CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot import; this tells SQLite to copy bound text and blobs.
static inline void (*csqlite_transient(void))(void *) {
    return SQLITE_TRANSIENT;
}

#endif
