// SQLite's default page cache ("pcache1") behind a wrapper that knows which pages it holds.
//
// At every commit, and when a reader's snapshot moves, SQLite drops from the cache the pages past
// the end of the database (`xTruncate`). pcache1 only knows an upper bound of the keys it ever
// held, lowered by a truncation; when that bound lies more than a hash table's length past the
// limit, it walks every slot and every page of the table. B-tree balancing parks pages on a
// temporary key while it reorders new pages (the page of the locking byte, 262,145 with 4 KiB
// pages) and moves them back at once; the bound stays there, and the next commit walks the whole
// cache: with the writer's 64 MiB (16,384 slots, some 13,000 pages), 4.5 % of deliveryd's CPU
// under a load of status changes, on the one thread every write waits for.
//
// The wrapper keeps its own bound: the largest key fetched or moved to since the last truncation
// that covered it, except a key pages were moved to above that bound, which counts only while
// pages are parked on it. A truncation whose limit lies past that bound has nothing to drop and is
// not passed on. Whatever the wrapper cannot follow (a parked page evicted or discarded, more
// parked keys than it tracks) keeps a key in its bound, so it errs towards passing a truncation on,
// never towards skipping one that had pages to drop.

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "csqlite_page_cache.h"

enum { PARKED_KEYS = 4 };

typedef struct {
    sqlite3_pcache *inner;
    /// No page of the cache has a larger key, parked keys aside.
    unsigned int bound;
    /// Keys above `bound` that pages were moved to, and how many pages each holds now.
    unsigned int parkedKey[PARKED_KEYS];
    int parkedCount[PARKED_KEYS];
} WrappedCache;

static sqlite3_pcache_methods2 inner;
// Counted per thread: a connection is used by one thread at a time, so a test reads what its own
// connection did, whatever other threads do meanwhile.
static _Thread_local long passedTruncations;
static _Thread_local long sparedTruncations;

static int wrappedInit(void *argument) {
    return inner.xInit ? inner.xInit(inner.pArg) : SQLITE_OK;
}

static void wrappedShutdown(void *argument) {
    if (inner.xShutdown) inner.xShutdown(inner.pArg);
}

static sqlite3_pcache *wrappedCreate(int pageSize, int extraSize, int purgeable) {
    WrappedCache *cache = sqlite3_malloc(sizeof(WrappedCache));
    if (!cache) return NULL;
    memset(cache, 0, sizeof(WrappedCache));
    cache->inner = inner.xCreate(pageSize, extraSize, purgeable);
    if (!cache->inner) {
        sqlite3_free(cache);
        return NULL;
    }
    return (sqlite3_pcache *)cache;
}

static void wrappedCachesize(sqlite3_pcache *pointer, int pages) {
    inner.xCachesize(((WrappedCache *)pointer)->inner, pages);
}

static int wrappedPagecount(sqlite3_pcache *pointer) {
    return inner.xPagecount(((WrappedCache *)pointer)->inner);
}

static void raiseBound(WrappedCache *cache, unsigned int key) {
    if (key > cache->bound) cache->bound = key;
}

static sqlite3_pcache_page *wrappedFetch(sqlite3_pcache *pointer, unsigned int key, int create) {
    WrappedCache *cache = (WrappedCache *)pointer;
    sqlite3_pcache_page *page = inner.xFetch(cache->inner, key, create);
    if (page) raiseBound(cache, key);
    return page;
}

static void wrappedUnpin(sqlite3_pcache *pointer, sqlite3_pcache_page *page, int discard) {
    inner.xUnpin(((WrappedCache *)pointer)->inner, page, discard);
}

static void park(WrappedCache *cache, unsigned int key) {
    int freeSlot = -1;
    for (int slot = 0; slot < PARKED_KEYS; slot++) {
        if (cache->parkedCount[slot] > 0 && cache->parkedKey[slot] == key) {
            cache->parkedCount[slot]++;
            return;
        }
        if (cache->parkedCount[slot] == 0 && freeSlot < 0) freeSlot = slot;
    }
    if (freeSlot < 0) {
        raiseBound(cache, key);  // nowhere to follow it: it stays in the bound
        return;
    }
    cache->parkedKey[freeSlot] = key;
    cache->parkedCount[freeSlot] = 1;
}

static void unpark(WrappedCache *cache, unsigned int key) {
    for (int slot = 0; slot < PARKED_KEYS; slot++) {
        if (cache->parkedCount[slot] > 0 && cache->parkedKey[slot] == key) {
            cache->parkedCount[slot]--;
            return;
        }
    }
}

static void wrappedRekey(sqlite3_pcache *pointer, sqlite3_pcache_page *page, unsigned int oldKey, unsigned int newKey) {
    WrappedCache *cache = (WrappedCache *)pointer;
    inner.xRekey(cache->inner, page, oldKey, newKey);
    unpark(cache, oldKey);
    if (newKey > cache->bound) {
        park(cache, newKey);
    }
}

/// The largest key a cached page may have.
static unsigned int largestKey(const WrappedCache *cache) {
    unsigned int largest = cache->bound;
    for (int slot = 0; slot < PARKED_KEYS; slot++) {
        if (cache->parkedCount[slot] > 0 && cache->parkedKey[slot] > largest) largest = cache->parkedKey[slot];
    }
    return largest;
}

static void wrappedTruncate(sqlite3_pcache *pointer, unsigned int limit) {
    WrappedCache *cache = (WrappedCache *)pointer;
    if (limit > largestKey(cache)) {
        sparedTruncations++;
        return;
    }
    passedTruncations++;
    inner.xTruncate(cache->inner, limit);
    // Nothing at or past the limit is left.
    if (limit == 0) {
        cache->bound = 0;
    } else if (cache->bound >= limit) {
        cache->bound = limit - 1;
    }
    for (int slot = 0; slot < PARKED_KEYS; slot++) {
        if (cache->parkedKey[slot] >= limit) cache->parkedCount[slot] = 0;
    }
}

static void wrappedDestroy(sqlite3_pcache *pointer) {
    WrappedCache *cache = (WrappedCache *)pointer;
    inner.xDestroy(cache->inner);
    sqlite3_free(cache);
}

static void wrappedShrink(sqlite3_pcache *pointer) {
    inner.xShrink(((WrappedCache *)pointer)->inner);
}

int csqlite_install_page_cache(void) {
    int result = sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &inner);
    if (result != SQLITE_OK) return result;
    if (inner.iVersion < 1 || !inner.xCreate || !inner.xRekey || !inner.xTruncate) return SQLITE_ERROR;
    static sqlite3_pcache_methods2 wrapped;
    wrapped = (sqlite3_pcache_methods2){
        .iVersion = 1,
        .pArg = NULL,
        .xInit = wrappedInit,
        .xShutdown = wrappedShutdown,
        .xCreate = wrappedCreate,
        .xCachesize = wrappedCachesize,
        .xPagecount = wrappedPagecount,
        .xFetch = wrappedFetch,
        .xUnpin = wrappedUnpin,
        .xRekey = wrappedRekey,
        .xTruncate = wrappedTruncate,
        .xDestroy = wrappedDestroy,
        .xShrink = wrappedShrink,
    };
    return sqlite3_config(SQLITE_CONFIG_PCACHE2, &wrapped);
}

void csqlite_page_cache_truncations(long *passed, long *spared) {
    *passed = passedTruncations;
    *spared = sparedTruncations;
}
