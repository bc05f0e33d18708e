# The Redis Streams bus against private redis-servers (testing/redis_server.h).
gapless_test(redis_bus_itest SOURCES redis_bus_itest.cc
  LIBS gapless_events gapless_testing_redis fmt::fmt LABEL integration)
