/*
 * cache.h - the cubin cache: a table in memory in front of a directory of
 * entry files shared by every process of the user.
 *
 * Keys are 32-byte digests the caller computes (SHA-256 over the source, the
 * target, the NVRTC version, the options and the library version), so an
 * entry never needs invalidating: anything that changes the output changes
 * the key. The cache names files by the hex key only.
 *
 * A tli_cache may be used by several threads at once (its entry points
 * lock it); several processes may share one directory at once.
 */
#ifndef TILEC_CACHE_H
#define TILEC_CACHE_H

#include "internal.h"

typedef struct tli_cache tli_cache;

/* dir NULL: $TILEC_CACHE_DIR, else $XDG_CACHE_HOME/tilec, else
 * $HOME/.cache/tilec. disk 0: memory only; TL_DISK_CACHE_IF_EXISTS: the
 * directory only when it exists (never created or probed; memory only,
 * silently, otherwise); any other value: memory and disk. When the
 * directory cannot be created or written, the cache works from memory only
 * and says so once through log (TL_LOG_WARN); that is not an error.
 * Errors: TL_ERR_INVALID_ARG (out NULL), TL_ERR_OUT_OF_MEMORY. */
tl_status tli_cache_open(const char *dir, int disk, tl_log_fn log, void *log_user,
                         tli_cache **out);
/* Frees the memory entries; disk entries stay. NULL is allowed. */
void tli_cache_close(tli_cache *c);
/* 0 miss; 1 memory hit; 2 disk hit. On a hit *data is malloc'ed (caller
 * frees), *len its size. A damaged disk entry is counted, deleted and
 * reported as a miss, so the caller rebuilds and puts it again. */
int tli_cache_get(tli_cache *c, const uint8_t key[32], void **data, size_t *len);
/* meta: a short NUL-terminated description stored in the entry (kernel name,
 * target, nvrtc version...); NULL for none. A disk write that fails turns
 * the disk off (one warning) but does not fail the put. Errors:
 * TL_ERR_INVALID_ARG, TL_ERR_OUT_OF_MEMORY. */
tl_status tli_cache_put(tli_cache *c, const uint8_t key[32], const void *data, size_t len,
                        const char *meta);
tl_status tli_cache_stats(tli_cache *c, tl_cache_stats *out);
/* Removes the memory entries and the disk entries (only files that start
 * as the cache's do), and whatever is in the way at a path the cache owns
 * (a directory at an entry's path, a file at a shard's). Errors:
 * TL_ERR_INVALID_ARG, TL_ERR_IO (something could not be removed; the rest
 * still is). */
tl_status tli_cache_clear(tli_cache *c);
/* The directory in use; "" when the disk is off (or fell back). Not for
 * use while other threads use the cache (tli_cache_stats copies it). */
const char *tli_cache_dir(const tli_cache *c);

#endif
