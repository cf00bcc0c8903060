-- register.lua: the library's functions, one per operation. Their names
-- carry the library's version (@VERSION@, a digest of its source), so
-- that instances of different versions share a Redis.
redis.register_function('bouncer_check_@VERSION@', checkCall)
redis.register_function('bouncer_refund_@VERSION@', refundCall)
redis.register_function('bouncer_reset_@VERSION@', resetCall)
redis.register_function('bouncer_shares_@VERSION@', sharesCall)
redis.register_function('bouncer_sync_@VERSION@', syncCall)
