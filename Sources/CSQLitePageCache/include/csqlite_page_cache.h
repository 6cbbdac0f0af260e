#ifndef DELIVERYD_CSQLITE_PAGE_CACHE_H
#define DELIVERYD_CSQLITE_PAGE_CACHE_H

/// Installs SQLite's own page cache behind a wrapper that spares commits a scan of the whole
/// cache (see page_cache.c). Must run before SQLite initializes; returns SQLITE_OK, or the error
/// of `sqlite3_config` (SQLITE_MISUSE once SQLite is initialized), in which case nothing changed.
int csqlite_install_page_cache(void);

/// The truncations the calling thread made since it started: passed on to SQLite's cache, and
/// spared because no cached page could lie past the limit.
void csqlite_page_cache_truncations(long *passed, long *spared);

#endif
