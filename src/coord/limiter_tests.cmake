# Tests of the rate limiter and the frontier (included by src/coord/CMakeLists.txt).
gapless_test(rate_limiter_itest SOURCES rate_limiter_itest.cc
  LIBS gapless_coord gapless_testing_redis LABEL integration FIXTURES redis)
gapless_test(frontier_itest SOURCES frontier_itest.cc
  LIBS gapless_coord gapless_testing_redis LABEL integration FIXTURES redis)
