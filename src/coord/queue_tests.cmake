# Tests of the Redis client and the leased work queue (included by src/coord/CMakeLists.txt).
gapless_test(redis_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/redis_test.cc
  LIBS gapless_coord gapless_core)
gapless_test(redis_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/redis_itest.cc
  LIBS gapless_coord gapless_testing_redis gapless_testing_proxy gapless_core
  LABEL integration FIXTURES redis)
gapless_test(queue_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/queue_itest.cc
  ${CMAKE_CURRENT_LIST_DIR}/queue_janitor_itest.cc ${CMAKE_CURRENT_LIST_DIR}/queue_fence_itest.cc
  ${CMAKE_CURRENT_LIST_DIR}/queue_complete_claim_itest.cc
  LIBS gapless_coord gapless_testing_redis gapless_core
  LABEL integration FIXTURES redis)
gapless_test(queue_batch_itest SOURCES ${CMAKE_CURRENT_LIST_DIR}/queue_batch_itest.cc
  LIBS gapless_coord gapless_testing_redis gapless_core
  LABEL integration FIXTURES redis)
