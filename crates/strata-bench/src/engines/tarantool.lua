-- strata-bench micro, Tarantool Vinyl peer. The Rust driver (src/micro/tarantool.rs)
-- fills in the parameters marked with at-signs below, runs
-- `tarantool bench.lua` in a fresh work directory and reads one JSON object per stdout
-- line: preload progress, one sample per second, and a final summary.

local fiber = require('fiber')
local json = require('json')
local clock = require('clock')

local ROWS = @ROWS@
local THREADS = @THREADS@
local MAX_BATCH = @MAX_BATCH@
local SECONDS = @SECONDS@
local SEED = @SEED@
local EAGER = @EAGER@
local PRELOAD_BATCH = @PRELOAD_BATCH@

local function emit(t)
    io.stdout:write(json.encode(t), '\n')
    io.stdout:flush()
end

box.cfg{
    listen = nil,
    work_dir = '@WORK_DIR@',
    log = 'tarantool.log',
    memtx_memory = 32 * 1024 * 1024,
    vinyl_memory = 128 * 1024 * 1024,
    vinyl_cache = @CACHE_BYTES@,
    vinyl_run_count_per_level = 2,
    vinyl_run_size_ratio = 3.5,
    vinyl_bloom_fpr = 0.05,
    vinyl_page_size = 8192,
    vinyl_write_threads = 2, -- the smallest value allowed
    vinyl_read_threads = 1,
    wal_mode = 'write',
    checkpoint_interval = 0,
}

local s = box.schema.space.create('test', {
    engine = 'vinyl',
    format = {
        {name = 'f1', type = 'unsigned'},
        {name = 'f2', type = 'unsigned'},
        {name = 'f3', type = 'unsigned'},
        {name = 'f4', type = 'unsigned'},
        {name = 'f5', type = 'unsigned'},
    },
})
s:create_index('pk', {type = 'tree', parts = {'f1'}})
for i = 2, 5 do
    s:create_index('i' .. i, {type = 'tree', unique = false, parts = {'f' .. i}})
end
if EAGER then
    -- A trigger makes Vinyl 2.6 read the old tuple on REPLACE and DELETE and delete
    -- its secondary entries at once: the eager mode (Vinyl otherwise defers them).
    s:on_replace(function(old, new) end)
end

-- Counters summed over the five indexes; dumps are the scheduler's (whole rounds).
local function probe()
    local p = {entries = 0, bytes = 0, compactions = 0, lookups = 0}
    for _, idx in pairs({s.index.pk, s.index.i2, s.index.i3, s.index.i4, s.index.i5}) do
        local st = idx:stat()
        p.entries = p.entries + (st.disk.rows or 0)
        p.bytes = p.bytes + (st.disk.bytes or 0)
        p.compactions = p.compactions + ((st.disk.compaction or {}).count or 0)
    end
    p.lookups = s.index.pk:stat().lookup or 0
    p.flushes = (box.stat.vinyl().scheduler or {}).dump_count or 0
    return p
end

math.randomseed(SEED)
local t0 = clock.monotonic()
local k = 1
while k <= ROWS do
    local last = math.min(k + PRELOAD_BATCH - 1, ROWS)
    box.begin()
    for key = k, last do
        s:replace{key, math.random(ROWS), math.random(ROWS), math.random(ROWS), math.random(ROWS)}
    end
    box.commit()
    emit({type = 'preload', done = last})
    k = last + 1
end
local preload_secs = clock.monotonic() - t0
t0 = clock.monotonic()
box.snapshot() -- dumps every index
local settle_secs = clock.monotonic() - t0
local base = probe()
emit({type = 'preloaded', preload_secs = preload_secs, settle_secs = settle_secs})

local function since_base(p)
    return {
        flushes = p.flushes - base.flushes,
        compactions = p.compactions - base.compactions,
        entries = p.entries,
        bytes = p.bytes,
        lookups = p.lookups - base.lookups,
    }
end

-- With the trigger, concurrent write transactions crash Vinyl 2.6 (SIGSEGV): in eager
-- mode a latch lets one transaction run at a time.
local latch = EAGER and fiber.channel(1) or nil
local stmts, batches, aborts = 0, 0, 0
local last_error = nil
local stop = false

local function batch(n)
    box.begin()
    for _ = 1, n do
        local key = math.random(ROWS)
        if math.random() < 0.5 then
            s:replace{key, math.random(ROWS), math.random(ROWS), math.random(ROWS), math.random(ROWS)}
        else
            s:delete{key}
        end
    end
    box.commit()
end

local function client()
    while not stop do
        local n = math.random(MAX_BATCH)
        if latch then latch:put(true) end
        local ok, err = pcall(batch, n)
        if not ok and box.is_in_txn() then box.rollback() end
        if latch then latch:get() end
        if ok then
            stmts = stmts + n
            batches = batches + 1
        else
            aborts = aborts + 1
            last_error = tostring(err)
        end
    end
end

local start = clock.monotonic()
local clients = {}
for i = 1, THREADS do
    clients[i] = fiber.new(client)
    clients[i]:set_joinable(true)
end
local prev_stmts, prev_t = 0, 0
for sec = 1, SECONDS do
    local wait = start + sec - clock.monotonic()
    if wait > 0 then fiber.sleep(wait) end
    local t = clock.monotonic() - start
    local sample = since_base(probe())
    sample.type = 'sample'
    sample.t = t
    sample.total = stmts
    sample.rate = (stmts - prev_stmts) / (t - prev_t)
    emit(sample)
    prev_stmts, prev_t = stmts, t
end
stop = true
for i = 1, THREADS do clients[i]:join() end
local summary = since_base(probe())
summary.type = 'summary'
summary.elapsed_secs = clock.monotonic() - start
summary.statements = stmts
summary.batches = batches
summary.aborts = aborts
summary.last_error = last_error
summary.version = box.info.version
emit(summary)
os.exit(0)
