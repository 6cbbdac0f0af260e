#ifndef DELIVERYD_CSQLITE_SHIM_H
#define DELIVERYD_CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot import; this tells SQLite to copy bound text and blobs.
static inline void (*csqlite_transient(void))(void *) {
    return SQLITE_TRANSIENT;
}

/// Turns off SQLite's memory statistics: with them on (the default), every allocation of every
/// connection takes one process-wide mutex, which the writer and the readers, each on its own
/// thread, then queue on. deliveryd reads none of those statistics. `sqlite3_config` is variadic,
/// which Swift cannot call; it must run before SQLite initializes (else `SQLITE_MISUSE`).
static inline int csqlite_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
