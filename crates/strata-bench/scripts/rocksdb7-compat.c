/* Linked only into a strata-bench built against a system RocksDB 7.x
 * (scripts/build-with-system-rocksdb.sh). The rocksdb crate's drop code for a write
 * buffer manager calls this C API entry point, which RocksDB added in 8.x; the
 * benchmarks never create a write buffer manager, so it is never reached. */
void rocksdb_write_buffer_manager_destroy(void *wbm) {
    (void)wbm;
    __builtin_trap();
}
